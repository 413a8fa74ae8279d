//! 837P and 837I interchanges as a clearinghouse sends them, for the tests and the bench:
//! billing providers each with their claims, subscribers, diagnoses, lines with
//! modifiers, replacements and voids. Every document it writes passes pyx12.

#![allow(dead_code)]

use std::fmt::Write as _;

/// One claim to write.
#[derive(Debug, Clone)]
pub struct Claim {
    pub claim_id: String,
    pub provider_name: String,
    pub npi: String,
    pub member_id: String,
    pub last: String,
    pub first: String,
    /// `CCYYMMDD`.
    pub date: String,
    pub diagnoses: Vec<String>,
    pub lines: Vec<Line>,
    /// CLM05-3: `1`, `7` or `8`.
    pub frequency: char,
    pub replaces: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub code: String,
    pub modifiers: Vec<String>,
    pub cents: i64,
    pub units: i64,
}

impl Claim {
    pub fn cents(&self) -> i64 {
        self.lines.iter().map(|l| l.cents).sum()
    }
}

/// Dollars as X12 writes them.
pub fn dollars(cents: i64) -> String {
    if cents % 100 == 0 {
        format!("{}", cents / 100)
    } else {
        format!("{}.{:02}", cents / 100, cents % 100)
    }
}

/// A valid NPI (Luhn check digit over the `80840` prefix) from nine digits.
pub fn npi(base: u32) -> String {
    let digits = format!("{:09}", base % 1_000_000_000);
    let mut sum = 0;
    for (i, b) in format!("80840{digits}").bytes().rev().enumerate() {
        let mut d = u32::from(b - b'0');
        if i % 2 == 0 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    format!("{digits}{}", (10 - sum % 10) % 10)
}

/// An interchange of `claims`, `per_set` claims to a transaction set; `institutional`
/// writes an 837I (005010X223A2), else an 837P (005010X222A1).
pub fn interchange(claims: &[Claim], per_set: usize, institutional: bool, control: u32) -> String {
    let version = if institutional {
        "005010X223A2"
    } else {
        "005010X222A1"
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ISA*00*          *00*          *ZZ*SUBMITTER      *ZZ*CLAIMSSVC      *240101*1200*^*00501*{control:09}*0*P*:~"
    );
    let _ = writeln!(
        out,
        "GS*HC*SUBMITTER*CLAIMSSVC*20240101*1200*{control}*X*{version}~"
    );
    let chunks: Vec<&[Claim]> = claims.chunks(per_set.max(1)).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        let st = format!("{:04}", i + 1);
        let mut set = Vec::<String>::new();
        set.push(format!("ST*837*{st}*{version}"));
        set.push(format!("BHT*0019*00*B{control}S{st}*20240101*1200*CH"));
        set.push("NM1*41*2*SUBMITTER CO*****46*SUB01".into());
        set.push("PER*IC*EDI DESK*TE*5555551234".into());
        set.push("NM1*40*2*CLAIMS SERVICE*****46*CLAIMSSVC".into());
        let mut hl = 0;
        let mut provider_hl = 0;
        let mut last_npi = String::new();
        for c in chunk.iter() {
            if c.npi != last_npi {
                hl += 1;
                provider_hl = hl;
                last_npi = c.npi.clone();
                set.push(format!("HL*{hl}**20*1"));
                set.push(format!("NM1*85*2*{}*****XX*{}", c.provider_name, c.npi));
                set.push("N3*1 MAIN ST".into());
                set.push("N4*SPRINGFIELD*IL*627010000".into());
                set.push("REF*EI*123456789".into());
            }
            hl += 1;
            set.push(format!("HL*{hl}*{provider_hl}*22*0"));
            set.push("SBR*P*18*******CI".into());
            set.push(format!(
                "NM1*IL*1*{}*{}****MI*{}",
                c.last, c.first, c.member_id
            ));
            set.push("N3*2 ELM ST".into());
            set.push("N4*SPRINGFIELD*IL*627010000".into());
            set.push("DMG*D8*19800101*F".into());
            set.push("NM1*PR*2*CLAIMS SERVICE*****PI*CLAIMSSVC".into());
            let amount = dollars(c.cents());
            if institutional {
                set.push(format!(
                    "CLM*{}*{amount}***13:A:{}**A*Y*Y",
                    c.claim_id, c.frequency
                ));
                set.push(format!("DTP*434*RD8*{}-{}", c.date, c.date));
                set.push("CL1*1*1*01".into());
            } else {
                set.push(format!(
                    "CLM*{}*{amount}***11:B:{}*Y*A*Y*Y",
                    c.claim_id, c.frequency
                ));
            }
            if let Some(r) = &c.replaces {
                set.push(format!("REF*F8*{r}"));
            }
            // The principal diagnosis first; an 837I carries the others in an HI of
            // their own.
            let mut hi = String::from("HI");
            for (j, d) in c.diagnoses.iter().enumerate() {
                if j == 1 && institutional {
                    set.push(std::mem::replace(&mut hi, String::from("HI")));
                }
                let q = if j == 0 { "ABK" } else { "ABF" };
                let _ = write!(hi, "*{q}:{d}");
            }
            set.push(hi);
            for (n, l) in c.lines.iter().enumerate() {
                set.push(format!("LX*{}", n + 1));
                let mut proc = format!("HC:{}", l.code);
                for m in &l.modifiers {
                    let _ = write!(proc, ":{m}");
                }
                if institutional {
                    set.push(format!(
                        "SV2*0450*{proc}*{}*UN*{}",
                        dollars(l.cents),
                        l.units
                    ));
                } else {
                    set.push(format!(
                        "SV1*{proc}*{}*UN*{}***1",
                        dollars(l.cents),
                        l.units
                    ));
                }
                set.push(format!("DTP*472*D8*{}", c.date));
            }
        }
        set.push(format!("SE*{}*{st}", set.len() + 1));
        for s in set {
            out.push_str(&s);
            out.push_str("~\n");
        }
    }
    let _ = writeln!(out, "GE*{}*{control}~", chunks.len());
    let _ = writeln!(out, "IEA*1*{control:09}~");
    out
}

/// `n` original claims over `providers` (NPIs from `npi(1..)`) and `members`
/// (`member_ids`), dated `date`, with one to three lines of which some carry modifiers.
pub fn claims(
    prefix: &str,
    n: usize,
    providers: &[(String, String)],
    members: &[String],
    date: &str,
) -> Vec<Claim> {
    const CODES: [&str; 5] = ["99213", "99214", "87880", "93000", "71046"];
    const DX: [&str; 4] = ["Z00129", "J020", "R05", "E119"];
    (0..n)
        .map(|i| {
            let (name, npi) = &providers[i * providers.len() / n.max(1)];
            let lines = (0..1 + i % 3)
                .map(|j| Line {
                    code: CODES[(i + j) % CODES.len()].to_owned(),
                    modifiers: if (i + j) % 4 == 0 {
                        vec!["25".into()]
                    } else {
                        Vec::new()
                    },
                    cents: 2_500 + ((i * 37 + j * 11) % 200) as i64 * 50,
                    units: 1 + (j % 2) as i64,
                })
                .collect();
            Claim {
                claim_id: format!("{prefix}{i:06}"),
                provider_name: name.clone(),
                npi: npi.clone(),
                member_id: members[i % members.len()].clone(),
                last: format!("LAST{}", i % members.len()),
                first: "PAT".into(),
                date: date.to_owned(),
                diagnoses: DX[..1 + i % 2].iter().map(|s| (*s).to_owned()).collect(),
                lines,
                frequency: '1',
                replaces: None,
            }
        })
        .collect()
}
