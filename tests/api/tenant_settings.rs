//! `GET/PATCH /tenant/settings` (contract: Tenants and users).

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Backend, TestApp};

crate::both_backends!(
    settings_start_at_the_contract_defaults_and_patches_apply,
    an_out_of_range_setting_is_422_naming_it_and_changes_nothing,
    one_tenants_settings_are_invisible_to_another,
);

async fn settings_start_at_the_contract_defaults_and_patches_apply(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    let r = app.get("/tenant/settings", &s.access).await;
    assert_eq!(
        r.body,
        json!({
            "fraud_flag_threshold": 0.8,
            "rate_limit_per_minute": 60000,
            "max_upload_bytes": 26214400,
            "auto_approve_below": null,
            "eligibility_required": false,
            "delivery_log_retention_days": 30
        })
    );
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({ "fraud_flag_threshold": 0.65, "auto_approve_below": 5000 })),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["fraud_flag_threshold"], 0.65);
    let r = app.get("/tenant/settings", &s.access).await;
    assert_eq!(r.body["fraud_flag_threshold"], 0.65);
    assert_eq!(r.body["auto_approve_below"], 5000);
    assert_eq!(r.body["rate_limit_per_minute"], 60000);
}

async fn an_out_of_range_setting_is_422_naming_it_and_changes_nothing(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure").await;
    for (body, field) in [
        (
            json!({ "fraud_flag_threshold": 1.2 }),
            "fraud_flag_threshold",
        ),
        (
            json!({ "rate_limit_per_minute": 0 }),
            "rate_limit_per_minute",
        ),
        (
            json!({ "rate_limit_per_minute": -5 }),
            "rate_limit_per_minute",
        ),
        (json!({ "max_upload_bytes": "big" }), "max_upload_bytes"),
    ] {
        let r = app
            .call(
                Method::PATCH,
                "/tenant/settings",
                Some(&s.access),
                Some(body),
            )
            .await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field)
        );
    }
    let r = app
        .call(
            Method::PATCH,
            "/tenant/settings",
            Some(&s.access),
            Some(json!({ "no_such_setting": 1 })),
        )
        .await;
    r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    let r = app.get("/tenant/settings", &s.access).await;
    assert_eq!(r.body["fraud_flag_threshold"], 0.8);
    assert_eq!(r.body["rate_limit_per_minute"], 60000);
}

async fn one_tenants_settings_are_invisible_to_another(b: Backend) {
    let app = TestApp::spawn(b).await;
    let a = app.session("tenant-a", "tenant:configure").await;
    let b2 = app.session("tenant-b", "tenant:configure").await;
    app.call(
        Method::PATCH,
        "/tenant/settings",
        Some(&a.access),
        Some(json!({ "fraud_flag_threshold": 0.3 })),
    )
    .await;
    assert_eq!(
        app.get("/tenant/settings", &a.access).await.body["fraud_flag_threshold"],
        0.3
    );
    assert_eq!(
        app.get("/tenant/settings", &b2.access).await.body["fraud_flag_threshold"],
        0.8
    );
}
