//! The signed delivery body and its headers (spec: Signature; contract: Webhooks).
//!
//! The body's members are `id`, `event`, `timestamp`, `data`, `signature`, in that
//! order. `signature` signs the body without its own member: the bytes up to the end of
//! `data`, then `}`. `X-Service-Signature` signs the whole raw body. The Standard
//! Webhooks `webhook-signature` signs `{id}.{timestamp}.{body}`. All three are
//! HMAC-SHA256 keyed with the UTF-8 bytes of the subscription's secret.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;

/// An event as it is delivered, before signing; field order is the wire order.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Envelope<'a> {
    pub id: &'a str,
    pub event: &'a str,
    pub timestamp: &'a str,
    /// The event's data as it was written, copied through unparsed.
    pub data: &'a serde_json::value::RawValue,
}

/// A delivery ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub body: Vec<u8>,
    /// `X-Service-Signature`: `sha256=` + hex of the HMAC of `body`.
    pub service_signature: String,
    /// `webhook-timestamp`: Unix seconds at sending.
    pub webhook_timestamp: i64,
    /// `webhook-signature`: `v1,` + base64 of the HMAC of `{id}.{timestamp}.{body}`.
    pub webhook_signature: String,
}

fn hmac(secret: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC accepts keys of any length; this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

/// The unsigned body: the envelope's JSON, `{"id":…,"event":…,"timestamp":…,"data":…}`.
pub fn unsigned_body(envelope: &Envelope<'_>) -> Vec<u8> {
    serde_json::to_vec(envelope).unwrap_or_default()
}

/// Signs `unsigned` (from [`unsigned_body`]) for sending at `now_s`.
pub fn sign(secret: &[u8], event_id: &str, unsigned: &[u8], now_s: i64) -> Signed {
    let inner = hex::encode(hmac(secret, &[unsigned]));
    // `unsigned` is a JSON object: replace its closing brace by the signature member.
    let open = unsigned.strip_suffix(b"}").unwrap_or(unsigned);
    let mut body = Vec::with_capacity(unsigned.len() + 84);
    body.extend_from_slice(open);
    body.extend_from_slice(b",\"signature\":\"sha256=");
    body.extend_from_slice(inner.as_bytes());
    body.extend_from_slice(b"\"}");
    let service_signature = format!("sha256={}", hex::encode(hmac(secret, &[&body])));
    let ts = now_s.to_string();
    let webhook_signature = format!(
        "v1,{}",
        STANDARD.encode(hmac(
            secret,
            &[event_id.as_bytes(), b".", ts.as_bytes(), b".", &body]
        ))
    );
    Signed {
        body,
        service_signature,
        webhook_timestamp: now_s,
        webhook_signature,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data() -> Box<serde_json::value::RawValue> {
        serde_json::value::to_raw_value(
            &serde_json::json!({"claim_id": "CLM-1", "outcome": "ADJUDICATED"}),
        )
        .unwrap()
    }

    fn envelope(data: &serde_json::value::RawValue) -> Envelope<'_> {
        Envelope {
            id: "evt_1",
            event: "claim.completed",
            timestamp: "2026-01-01T00:00:00Z",
            data,
        }
    }

    #[test]
    fn members_come_in_the_contract_order_and_the_inner_signature_signs_the_rest() {
        let data = data();
        let unsigned = unsigned_body(&envelope(&data));
        let signed = sign(b"s3cret", "evt_1", &unsigned, 1_700_000_000);
        let text = String::from_utf8(signed.body.clone()).unwrap();
        let order: Vec<usize> = [
            "\"id\"",
            "\"event\"",
            "\"timestamp\"",
            "\"data\"",
            "\"signature\"",
        ]
        .iter()
        .map(|m| text.find(m).unwrap())
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        // The body without its signature member is exactly what the inner HMAC signs.
        let sig_at = text.find(",\"signature\"").unwrap();
        let without = format!("{}}}", &text[..sig_at]);
        assert_eq!(without.as_bytes(), unsigned.as_slice());
        let value: serde_json::Value = serde_json::from_slice(&signed.body).unwrap();
        assert_eq!(
            value["signature"],
            format!("sha256={}", hex::encode(hmac(b"s3cret", &[&unsigned])))
        );
    }

    #[test]
    fn known_answer_for_the_header_signature() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            hex::encode(hmac(b"Jefe", &[b"what do ya want for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_different_secret_gives_different_signatures() {
        let data = data();
        let unsigned = unsigned_body(&envelope(&data));
        let a = sign(b"one", "evt_1", &unsigned, 1);
        let b = sign(b"two", "evt_1", &unsigned, 1);
        assert_ne!(a.service_signature, b.service_signature);
        assert_ne!(a.webhook_signature, b.webhook_signature);
    }
}
