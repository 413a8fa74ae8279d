//! The ISA/GS/ST envelope: what the service reads from an inbound interchange to answer
//! it, and how it wraps the documents it writes.

use super::segments::{clean, Writer};
use crate::date::Date;

/// Who sent an interchange and how it is numbered: an answer swaps sender and receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parties {
    /// ISA05/ISA06 and ISA07/ISA08: qualifier and id.
    pub sender_qualifier: String,
    pub sender_id: String,
    pub receiver_qualifier: String,
    pub receiver_id: String,
    /// GS02 and GS03.
    pub app_sender: String,
    pub app_receiver: String,
    /// ISA15: `P` production or `T` test, kept in the answer.
    pub usage: String,
}

impl Parties {
    /// The parties of an answer to an interchange from `self`.
    pub fn reversed(&self) -> Parties {
        Parties {
            sender_qualifier: self.receiver_qualifier.clone(),
            sender_id: self.receiver_id.clone(),
            receiver_qualifier: self.sender_qualifier.clone(),
            receiver_id: self.sender_id.clone(),
            app_sender: self.app_receiver.clone(),
            app_receiver: self.app_sender.clone(),
            usage: self.usage.clone(),
        }
    }

    /// When nothing could be read from the sender's envelope.
    pub fn unknown() -> Parties {
        Parties {
            sender_qualifier: "ZZ".into(),
            sender_id: "CLAIMS".into(),
            receiver_qualifier: "ZZ".into(),
            receiver_id: "UNKNOWN".into(),
            app_sender: "CLAIMS".into(),
            app_receiver: "UNKNOWN".into(),
            usage: "P".into(),
        }
    }
}

/// The time an envelope is stamped with, as the envelope writes it.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
}

impl Stamp {
    pub fn from_unix_ms(ms: i64) -> Stamp {
        let secs = ms.div_euclid(1000);
        let date = Date::from_days_since_epoch(secs.div_euclid(86_400));
        let of_day = secs.rem_euclid(86_400);
        Stamp {
            year: date.year(),
            month: date.month(),
            day: date.day(),
            hour: (of_day / 3600) as u8,
            minute: (of_day % 3600 / 60) as u8,
        }
    }

    /// CCYYMMDD.
    pub fn date(&self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// HHMM.
    pub fn time(&self) -> String {
        format!("{:02}{:02}", self.hour, self.minute)
    }
}

/// A padded fixed-width ISA element.
fn pad(s: &str, n: usize) -> String {
    let mut v = clean(s, n);
    while v.len() < n {
        v.push(' ');
    }
    v
}

/// Writes ISA, GS and ST; [`Envelope::close`] writes SE, GE and IEA. One functional
/// group of one transaction set, which is all the service sends per document.
#[derive(Debug)]
pub struct Envelope {
    w: Writer,
    control: u32,
    set_control: String,
}

impl Envelope {
    /// `functional_id`: GS01 (`FA` 999, `HN` 277, `HP` 835); `set_id`: ST01;
    /// `version`: GS08 and ST03; `control`: the interchange and group control number
    /// (1 to 999,999,999).
    pub fn open(
        parties: &Parties,
        stamp: Stamp,
        control: u32,
        functional_id: &str,
        set_id: &str,
        version: &str,
    ) -> Envelope {
        let mut w = Writer::new();
        let isa_date = format!("{:02}{:02}{:02}", stamp.year % 100, stamp.month, stamp.day);
        let control_text = format!("{:09}", control % 1_000_000_000);
        let usage = if parties.usage == "T" { "T" } else { "P" };
        w.seg(
            "ISA",
            &[
                "00",
                &pad("", 10),
                "00",
                &pad("", 10),
                &pad(&parties.sender_qualifier, 2),
                &pad(&parties.sender_id, 15),
                &pad(&parties.receiver_qualifier, 2),
                &pad(&parties.receiver_id, 15),
                &isa_date,
                &stamp.time(),
                "^",
                "00501",
                &control_text,
                "0",
                usage,
                ":",
            ],
        );
        let group = control.to_string();
        w.seg(
            "GS",
            &[
                functional_id,
                &clean(&parties.app_sender, 15),
                &clean(&parties.app_receiver, 15),
                &stamp.date(),
                &stamp.time(),
                &group,
                "X",
                version,
            ],
        );
        w.start_set();
        let set_control = "0001".to_owned();
        // The 835's guide (X221A1) predates ST03 and marks it not used; the later guides
        // require it.
        let st03 = if set_id == "835" { "" } else { version };
        w.seg("ST", &[set_id, &set_control, st03]);
        Envelope {
            w,
            control,
            set_control,
        }
    }

    pub fn seg(&mut self, id: &str, elements: &[&str]) {
        self.w.seg(id, elements);
    }

    pub fn close(mut self) -> String {
        let count = self.w.set_count().to_string();
        self.w.seg("SE", &[&count, &self.set_control]);
        let group = self.control.to_string();
        self.w.seg("GE", &["1", &group]);
        let control_text = format!("{:09}", self.control % 1_000_000_000);
        self.w.seg("IEA", &["1", &control_text]);
        self.w.finish()
    }
}
