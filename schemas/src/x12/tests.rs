//! The reader and writers on a small interchange: the mapping of the contract, and the
//! acknowledgments' structure. pyx12 checks the documents in the API suite.

use super::claim837::read_837;
use super::envelope::Stamp;
use super::{ack277ca, ack999};
use crate::claim::Frequency;
use crate::date::Date;

const SAMPLE: &str = "ISA*00*          *00*          *ZZ*SUBMITTER      *ZZ*CLAIMSSVC      *240101*1200*^*00501*000000001*0*P*:~
GS*HC*SUBMITTER*CLAIMSSVC*20240101*1200*1*X*005010X222A1~
ST*837*0001*005010X222A1~
BHT*0019*00*REF1*20240101*1200*CH~
NM1*41*2*SUBMITTER CO*****46*SUB01~
PER*IC*EDI DESK*TE*5555551234~
NM1*40*2*CLAIMS SERVICE*****46*CLAIMSSVC~
HL*1**20*1~
NM1*85*2*GOOD CLINIC*****XX*1234567893~
N3*1 MAIN ST~
N4*SPRINGFIELD*IL*627010000~
REF*EI*123456789~
HL*2*1*22*0~
SBR*P*18*******CI~
NM1*IL*1*DOE*JANE****MI*M0001~
N3*2 ELM ST~
N4*SPRINGFIELD*IL*627010000~
DMG*D8*19800101*F~
NM1*PR*2*CLAIMS SERVICE*****PI*CLAIMSSVC~
CLM*C0001*150.5***11:B:1*Y*A*Y*Y~
HI*ABK:Z00129*ABF:J020~
LX*1~
SV1*HC:99213:25:59*100.5*UN*1***1~
DTP*472*D8*20240102~
LX*2~
SV1*HC:87880*50*UN*2***1~
DTP*472*D8*20240101~
HL*3*1*22*0~
SBR*P*18*******CI~
NM1*IL*1*ROE*RICH****MI*M0002~
NM1*PR*2*CLAIMS SERVICE*****PI*CLAIMSSVC~
CLM*C0002*12.345***11:B:7*Y*A*Y*Y~
REF*F8*C0000~
HI*ABK:R05~
LX*1~
SV1*HC:99213*12.345*UN*1***1~
DTP*472*D8*20240101~
SE*36*0001~
GE*1*1~
IEA*1*000000001~
";

#[test]
fn maps_an_837p_as_the_contract_says() {
    let read = read_837(SAMPLE).unwrap();
    assert_eq!(read.received, 1);
    assert_eq!(read.version, "005010X222A1");
    assert_eq!(read.parties.sender_id, "SUBMITTER");
    let claims: Vec<_> = read.claims().collect();
    assert_eq!(claims.len(), 2);
    let c = claims[0];
    assert!(c.problem.is_none(), "{:?}", c.problem);
    assert_eq!(c.claim_id, "C0001");
    assert_eq!(c.amount, 15_050);
    assert_eq!(c.billing_npi, "1234567893");
    assert_eq!(c.member_id, "M0001");
    assert_eq!(c.diagnosis_codes, ["Z00129", "J020"]);
    assert_eq!(c.service_date, Date::parse("2024-01-01"));
    assert_eq!(c.service_to, Date::parse("2024-01-02"));
    assert_eq!(c.lines.len(), 2);
    assert_eq!(c.lines[0].procedure_code, "99213");
    assert_eq!(c.lines[0].modifiers, ["25", "59"]);
    assert_eq!(c.lines[0].amount, 10_050);
    assert_eq!(c.lines[1].units, 2);
    assert_eq!(c.frequency, Frequency::Original);
    let bad = claims[1];
    assert_eq!(bad.frequency, Frequency::Replacement);
    assert_eq!(bad.replaces_claim_id.as_deref(), Some("C0000"));
    let p = bad.problem.as_ref().unwrap();
    assert_eq!(
        (p.segment_id.as_str(), p.position_in_set, p.element),
        ("CLM", 30, 2)
    );
    assert_eq!(p.field, "claim_amount");
}

#[test]
fn a_wrong_segment_count_rejects_only_its_set() {
    let read = read_837(&SAMPLE.replace("SE*36*", "SE*35*")).unwrap();
    assert_eq!(read.sets[0].rejected.as_ref().unwrap().0, "4");
    let ack = ack999::accepting(&read, Stamp::from_unix_ms(0), 7);
    assert!(ack.contains("IK5*R*4~"), "{ack}");
    assert!(ack.contains("AK9*R*1*1*0~"), "{ack}");
}

#[test]
fn unreadable_interchanges_are_refused_with_a_reason() {
    for (text, why) in [
        ("GS*HC~", "starts with an ISA"),
        (&SAMPLE[..SAMPLE.len() - 30], "cut short"),
        (&SAMPLE.replace("005010X222A1", "005010X999"), "GS01 HC"),
        (&SAMPLE.replace("GE*1*1~", "GE*2*1~"), "GE says 2"),
        (&SAMPLE.replace("ST*837", "ST*835"), "only 837"),
    ] {
        let e = read_837(text).unwrap_err();
        assert!(e.error.to_string().contains(why), "{why}: {}", e.error);
        let ack = ack999::rejecting(&e, Stamp::from_unix_ms(0), 1);
        assert!(ack.contains("AK9*R*0*0*0*"), "{ack}");
    }
}

#[test]
fn acknowledgments_answer_each_claim() {
    let read = read_837(SAMPLE).unwrap();
    let stamp = Stamp::from_unix_ms(1_704_110_400_000);
    let ack = ack999::accepting(&read, stamp, 42);
    assert!(
        ack.contains("IK3*CLM*30*2300*8~\nIK4*2*782*6~\nIK5*E~"),
        "{ack}"
    );
    assert!(ack.contains("AK9*E*1*1*1~"), "{ack}");
    assert!(ack.starts_with("ISA*00*          *00*          *ZZ*CLAIMSSVC      *ZZ*SUBMITTER      *240101*1200*^*00501*000000042*0*P*:~"), "{ack}");
    let acks = vec![Ok(()), Err("CLM02 is not an amount".to_owned())];
    let ca = ack277ca::render(&read, &acks, "batch-1", stamp, 43);
    assert!(ca.contains("TRN*2*C0001~\nSTC*A1:20*20240101*WQ*150.5~\nREF*1K*C0001~\nDTP*472*RD8*20240101-20240102~"), "{ca}");
    assert!(
        ca.contains("STC*A3:21*20240101*U*0********CLM02 is not an amount~"),
        "{ca}"
    );
    assert!(ca.contains("QTY*90*1~\nQTY*AA*1~"), "{ca}");
    if let Ok(dir) = std::env::var("CLAIMS_X12_OUT") {
        std::fs::write(format!("{dir}/sample.999"), &ack).unwrap();
        std::fs::write(format!("{dir}/sample.277"), &ca).unwrap();
        std::fs::write(format!("{dir}/sample.837"), SAMPLE).unwrap();
    }
}
