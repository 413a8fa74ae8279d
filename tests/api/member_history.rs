//! The member history that rules (`member_history.*`) and fraud scoring read: claims in
//! the 24 hours and the amount in the 30 days before each claim, the claim itself and
//! other members and tenants left out.

use pipeline::intake::accept;
use pipeline::model::ClaimSubmitted;
use pipeline::rules::MemberHistory;

use crate::support::{Backend, TestApp};

crate::both_backends!(each_claims_history_counts_the_day_and_sums_the_month_before_it);

const HOUR: i64 = 3_600_000;

fn command(tenant: &str, id: &str, member: &str, amount: i64, at: i64) -> ClaimSubmitted {
    ClaimSubmitted {
        tenant_id: schemas::TenantId::parse(tenant).unwrap(),
        claim: serde_json::from_value(serde_json::json!({
            "claim_id": id, "member_id": member, "provider_id": "PRV-1",
            "claim_amount": amount, "service_date": "2026-01-15"
        }))
        .unwrap(),
        rulebook_id: "rb".into(),
        rulebook_version: 1,
        received_at_ms: at,
    }
}

async fn each_claims_history_counts_the_day_and_sums_the_month_before_it(b: Backend) {
    let app = TestApp::spawn(b).await;
    for t in ["acme", "other"] {
        app.store.ensure_tenant(t, t).await.unwrap();
    }
    let now = 1_800_000_000_000;
    let commands = [
        command("acme", "OLD", "M1", 1, now - 31 * 24 * HOUR),
        command("acme", "MONTH", "M1", 10, now - 10 * 24 * HOUR),
        command("acme", "DAY-1", "M1", 100, now - 5 * HOUR),
        command("acme", "DAY-2", "M1", 1000, now - HOUR),
        command("acme", "NOW", "M1", 10_000, now),
        command("acme", "ELSE", "M2", 100_000, now - HOUR),
        command("other", "TENANT", "M1", 1_000_000, now - HOUR),
    ];
    let topic = app.state.topics.intake.clone();
    accept(&app.store, &app.state.bus, &topic, &commands, "test")
        .await
        .unwrap();

    let got = app
        .store
        .member_histories(&[
            ("acme", "M1", now),
            ("acme", "M1", now - 2 * HOUR),
            ("acme", "M2", now),
            ("acme", "NOBODY", now),
            ("other", "M1", now),
        ])
        .await
        .unwrap();
    let h = |claims_last_24h, amount_last_30d| MemberHistory {
        claims_last_24h,
        amount_last_30d,
    };
    assert_eq!(
        got,
        [
            h(2, 1110),
            h(1, 110),
            h(1, 100_000),
            h(0, 0),
            h(1, 1_000_000)
        ]
    );
}
