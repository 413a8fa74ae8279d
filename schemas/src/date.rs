//! Calendar dates in the contract's `YYYY-MM-DD` form.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A valid calendar date, kept as days since 1970-01-01 for cheap comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    year: i32,
    month: u8,
    day: u8,
}

impl Date {
    /// Parses exactly `YYYY-MM-DD` with a real month and day.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            let part = &s[r];
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        if !(1..=12).contains(&month)
            || day == 0
            || day > u32::from(days_in_month(year as i32, month as u8))
        {
            return None;
        }
        Some(Date {
            year: year as i32,
            month: month as u8,
            day: day as u8,
        })
    }

    pub fn year(&self) -> i32 {
        self.year
    }

    pub fn month(&self) -> u8 {
        self.month
    }

    pub fn day(&self) -> u8 {
        self.day
    }

    /// X12's `CCYYMMDD` (date format qualifier `D8`).
    pub fn parse_ccyymmdd(s: &str) -> Option<Self> {
        if s.len() != 8 || !s.is_ascii() {
            return None;
        }
        Self::parse(&format!("{}-{}-{}", &s[..4], &s[4..6], &s[6..]))
    }

    /// As X12 writes it: `CCYYMMDD`.
    pub fn ccyymmdd(&self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// Whole years from `self` (a date of birth) to `on`: the age on that day.
    pub fn years_until(&self, on: Date) -> i64 {
        let had_birthday = (on.month, on.day) >= (self.month, self.day);
        i64::from(on.year - self.year) - i64::from(!had_birthday)
    }

    pub fn from_ymd(year: i32, month: u8, day: u8) -> Option<Self> {
        Self::parse(&format!("{year:04}-{month:02}-{day:02}"))
    }

    /// Today in UTC.
    pub fn today_utc() -> Self {
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| (d.as_secs() / 86_400) as i64)
            .unwrap_or(0);
        Self::from_days_since_epoch(days)
    }

    /// Days from 1970-01-01 to this date (Howard Hinnant's algorithm).
    pub fn days_since_epoch(&self) -> i64 {
        let y = i64::from(self.year) - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// The civil date `days` after 1970-01-01 (Howard Hinnant's algorithm).
    pub fn from_days_since_epoch(days: i64) -> Self {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
        let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
        Date { year, month, day }
    }
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

impl fmt::Display for Date {
    /// `YYYY-MM-DD`. A date is written with every claim, record and rule input: the
    /// digits are laid out here, as the formatting machinery took a tenth of building a
    /// claim's rule input.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let year = match u16::try_from(self.year) {
            Ok(year) if year <= 9999 => year,
            _ => return write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day),
        };
        let digit = |n: u16| b'0' + (n % 10) as u8;
        let (month, day) = (u16::from(self.month), u16::from(self.day));
        let text = [
            digit(year / 1000),
            digit(year / 100),
            digit(year / 10),
            digit(year),
            b'-',
            digit(month / 10),
            digit(month),
            b'-',
            digit(day / 10),
            digit(day),
        ];
        // Only ASCII digits and dashes.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl Serialize for Date {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Parsed where the text lies, without a copy of it: every claim read carries a date.
impl<'de> Deserialize<'de> for Date {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Date;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a date as YYYY-MM-DD")
            }

            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Date, E> {
                Date::parse(s).ok_or_else(|| E::custom("must be a date as YYYY-MM-DD"))
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn days_since_epoch_round_trips() {
        for days in [-800_000, -1, 0, 59, 365, 11_016, 20_500, 2_932_896] {
            let d = super::Date::from_days_since_epoch(days);
            assert_eq!(d.days_since_epoch(), days, "{d}");
        }
    }

    use super::Date;

    /// Read from JSON text, a reader or a `Value` alike; anything but a real date in
    /// `YYYY-MM-DD` refused.
    #[test]
    fn reads_from_json_wherever_it_lies() {
        let want = Date::parse("2026-01-05").unwrap();
        assert_eq!(
            serde_json::from_str::<Date>(r#""2026-01-05""#).unwrap(),
            want
        );
        let read: Date = serde_json::from_reader(&b"\"2026-01-05\""[..]).unwrap();
        assert_eq!(read, want);
        let value: Date = serde_json::from_value(serde_json::json!("2026-01-05")).unwrap();
        assert_eq!(value, want);
        for bad in [r#""2026-02-30""#, r#""2026-1-5""#, "20260105", "null"] {
            assert!(serde_json::from_str::<Date>(bad).is_err(), "{bad}");
        }
    }

    /// The digits laid out by hand read as the formatting machinery writes them, from
    /// before year 1 to past 9999, and parse back to the same date.
    #[test]
    fn a_date_is_written_as_yyyy_mm_dd() {
        for days in (-800_000..3_000_000).step_by(997) {
            let d = Date::from_days_since_epoch(days);
            let text = d.to_string();
            assert_eq!(
                text,
                format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
                "{days}"
            );
            if (0..=9999).contains(&d.year) {
                assert_eq!(Date::parse(&text), Some(d), "{text}");
            }
        }
    }

    #[test]
    fn parses_only_real_dates() {
        assert!(Date::parse("2024-02-29").is_some());
        assert!(Date::parse("2023-02-29").is_none());
        assert!(Date::parse("2024-13-01").is_none());
        assert!(Date::parse("2024-1-01").is_none());
        assert!(Date::parse("2024-01-01T00:00").is_none());
        assert!(Date::parse("+024-01-01").is_none());
    }

    #[test]
    fn an_age_counts_whole_years_to_the_birthday() {
        let dob = Date::parse("1990-06-15").unwrap();
        assert_eq!(dob.years_until(Date::parse("2026-06-14").unwrap()), 35);
        assert_eq!(dob.years_until(Date::parse("2026-06-15").unwrap()), 36);
        assert_eq!(dob.years_until(Date::parse("1990-06-15").unwrap()), 0);
    }

    #[test]
    fn orders_and_converts_from_epoch_days() {
        assert!(Date::parse("2024-01-31") < Date::parse("2024-02-01"));
        assert_eq!(Date::from_days_since_epoch(0).to_string(), "1970-01-01");
        assert_eq!(
            Date::from_days_since_epoch(19_782).to_string(),
            "2024-02-29"
        );
    }
}
