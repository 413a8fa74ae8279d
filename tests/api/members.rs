//! Plans and members (contract part 2: Plans and members).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{Backend, Reply, TestApp};

crate::both_backends!(
    a_plan_is_created_read_listed_and_changed,
    plan_input_is_validated,
    a_member_is_created_read_and_changed,
    member_input_is_validated,
    an_import_upserts_and_answers_each_item_in_input_order,
    an_import_may_be_ndjson_and_is_bounded,
    plans_and_members_of_another_tenant_are_invisible,
    writes_need_tenant_configure_and_reads_claims_read,
);

fn ppo() -> Value {
    json!({"plan_id": "PPO", "name": "PPO Gold", "benefits": {
        "deductible": 50000, "coinsurance_pct": 20, "out_of_pocket_max": 300000,
        "copays": {"99213": 2500}, "visit_limits": {"97110": 20}
    }})
}

fn member(id: &str, plan: &str) -> Value {
    json!({"member_id": id, "date_of_birth": "1980-02-03", "sex": "F", "plan_id": plan,
           "coverage": [{"from": "2026-01-01"}]})
}

async fn post(app: &TestApp, token: &str, path: &str, body: Value) -> Reply {
    app.call(Method::POST, path, Some(token), Some(body)).await
}

async fn a_plan_is_created_read_listed_and_changed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    let r = post(&app, &s.access, "/plans", ppo()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.header("location"), Some("/api/v1/plans/PPO"));
    assert_eq!(r.body["benefits"]["deductible"], 50000);
    assert_eq!(r.body["benefits"]["copays"]["99213"], 2500);
    let dup = post(&app, &s.access, "/plans", ppo()).await;
    assert_eq!(
        dup.assert_error(StatusCode::CONFLICT, "CONFLICT")
            .as_deref(),
        Some("plan_id")
    );
    let mut hmo = ppo();
    hmo["plan_id"] = json!("HMO");
    post(&app, &s.access, "/plans", hmo).await;
    let page = app.get("/plans?limit=1", &s.access).await;
    assert_eq!(page.body["data"][0]["plan_id"], "HMO");
    let next = page.body["next_cursor"].as_str().unwrap();
    let page = app
        .get(&format!("/plans?limit=1&cursor={next}"), &s.access)
        .await;
    assert_eq!(page.body["data"][0]["plan_id"], "PPO");

    let changed = app
        .call(
            Method::PATCH,
            "/plans/PPO",
            Some(&s.access),
            Some(json!({"benefits": {"deductible": 10000, "coinsurance_pct": 10, "out_of_pocket_max": 200000}})),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    let got = app.get("/plans/PPO", &s.access).await;
    assert_eq!(got.body["name"], "PPO Gold");
    assert_eq!(got.body["benefits"]["deductible"], 10000);
    assert_eq!(got.body["benefits"]["copays"], json!({}));
    app.get("/plans/NOPE", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.call(
        Method::PATCH,
        "/plans/NOPE",
        Some(&s.access),
        Some(json!({"name": "x"})),
    )
    .await
    .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn plan_input_is_validated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    let with = |path: &str, v: Value| {
        let mut p = ppo();
        p["benefits"][path] = v;
        p
    };
    for (body, field) in [
        (
            with("coinsurance_pct", json!(101)),
            "benefits.coinsurance_pct",
        ),
        (with("deductible", json!(-1)), "benefits.deductible"),
        (
            with("copays", json!({"99213": -5})),
            "benefits.copays.99213",
        ),
        (
            json!({"plan_id": "P", "name": " ", "benefits": ppo()["benefits"]}),
            "name",
        ),
        (
            json!({"plan_id": "bad id", "name": "x", "benefits": ppo()["benefits"]}),
            "plan_id",
        ),
    ] {
        let r = post(&app, &s.access, "/plans", body).await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field),
            "{}",
            r.body
        );
    }
    post(&app, &s.access, "/plans", with("copay", json!({})))
        .await
        .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    let none = app.get("/plans", &s.access).await;
    assert_eq!(none.body["data"], json!([]), "nothing was stored");
}

async fn a_member_is_created_read_and_changed(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    post(&app, &s.access, "/plans", ppo()).await;
    let r = post(&app, &s.access, "/members", member("MBR-1", "PPO")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.header("location"), Some("/api/v1/members/MBR-1"));
    assert_eq!(r.body["coverage"], json!([{"from": "2026-01-01"}]));
    assert_eq!(r.body["sex"], "F");
    let dup = post(&app, &s.access, "/members", member("MBR-1", "PPO")).await;
    assert_eq!(
        dup.assert_error(StatusCode::CONFLICT, "CONFLICT")
            .as_deref(),
        Some("member_id")
    );
    let mut hmo = ppo();
    hmo["plan_id"] = json!("HMO");
    post(&app, &s.access, "/plans", hmo).await;
    let changed = app
        .call(
            Method::PATCH,
            "/members/MBR-1",
            Some(&s.access),
            Some(
                json!({"plan_id": "HMO", "coverage": [{"from": "2026-01-01", "to": "2026-03-31"}]}),
            ),
        )
        .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    let got = app.get("/members/MBR-1", &s.access).await;
    assert_eq!(got.body["plan_id"], "HMO");
    assert_eq!(got.body["coverage"][0]["to"], "2026-03-31");
    assert_eq!(got.body["date_of_birth"], "1980-02-03");
    app.get("/members/MBR-404", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn member_input_is_validated(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    post(&app, &s.access, "/plans", ppo()).await;
    let with = |k: &str, v: Value| {
        let mut m = member("MBR-1", "PPO");
        m[k] = v;
        m
    };
    for (body, field) in [
        (with("plan_id", json!("NOPE")), "plan_id"),
        (with("sex", json!("X")), "sex"),
        (with("date_of_birth", json!("2999-01-01")), "date_of_birth"),
        (with("date_of_birth", json!("1980-02-30")), "date_of_birth"),
        (
            with(
                "coverage",
                json!([{"from": "2026-05-01", "to": "2026-04-30"}]),
            ),
            "coverage[0].to",
        ),
    ] {
        let r = post(&app, &s.access, "/members", body).await;
        assert_eq!(
            r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
                .as_deref(),
            Some(field),
            "{}",
            r.body
        );
    }
    app.get("/members/MBR-1", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    post(&app, &s.access, "/members", member("MBR-1", "PPO")).await;
    let r = app
        .call(
            Method::PATCH,
            "/members/MBR-1",
            Some(&s.access),
            Some(json!({"plan_id": "NOPE"})),
        )
        .await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("plan_id")
    );
    assert_eq!(
        app.get("/members/MBR-1", &s.access).await.body["plan_id"],
        "PPO"
    );
}

async fn an_import_upserts_and_answers_each_item_in_input_order(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    post(&app, &s.access, "/plans", ppo()).await;
    post(&app, &s.access, "/members", member("OLD", "PPO")).await;
    let mut changed = member("OLD", "PPO");
    changed["sex"] = json!("U");
    let mut twice = member("NEW-2", "PPO");
    twice["coverage"] = json!([{"from": "2025-01-01", "to": "2025-12-31"}]);
    let body = json!([
        member("NEW-1", "PPO"),
        changed,
        member("BAD", "NOPE"),
        member("NEW-2", "PPO"),
        {"member_id": "NOSEX", "date_of_birth": "1990-01-01", "plan_id": "PPO", "coverage": []},
        twice,
    ]);
    let r = post(&app, &s.access, "/members/import", body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        (r.body["imported"].as_i64(), r.body["rejected"].as_i64()),
        (Some(4), Some(2))
    );
    let results = r.body["results"].as_array().unwrap();
    let summary: Vec<(String, String)> = results
        .iter()
        .map(|x| {
            (
                x["member_id"].as_str().unwrap_or("").to_owned(),
                x["status"]
                    .as_str()
                    .or(x["error"]["field"].as_str())
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("NEW-1", "created"),
        ("OLD", "updated"),
        ("BAD", "plan_id"),
        ("NEW-2", "created"),
        ("NOSEX", "sex"),
        ("NEW-2", "updated"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(summary, want);
    assert_eq!(results[2]["error"]["code"], "VALIDATION_ERROR");
    assert_eq!(app.get("/members/OLD", &s.access).await.body["sex"], "U");
    // A member named twice ends as its last item says.
    let m = app.get("/members/NEW-2", &s.access).await;
    assert_eq!(m.body["coverage"][0]["to"], "2025-12-31");
    app.get("/members/BAD", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
}

async fn an_import_may_be_ndjson_and_is_bounded(b: Backend) {
    let app = TestApp::spawn(b).await;
    let s = app.session("acme", "tenant:configure claims:read").await;
    post(&app, &s.access, "/plans", ppo()).await;
    let send = |body: String, mime: &'static str| {
        app.client
            .post(app.url("/members/import"))
            .bearer_auth(&s.access)
            .header("content-type", mime)
            .body(body)
            .send()
    };
    let body: String = (0..2500)
        .map(|i| format!("{}\n", member(&format!("M-{i}"), "PPO")))
        .collect();
    let r = Reply::from(send(body, "application/x-ndjson").await.unwrap()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["imported"], 2500);
    assert_eq!(
        app.get("/members/M-2499", &s.access).await.status,
        StatusCode::OK
    );
    let over = serde_json::to_string(&vec![member("X", "PPO"); 10_001]).unwrap();
    Reply::from(send(over, "application/json").await.unwrap())
        .await
        .assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR");
    app.get("/members/X", &s.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    Reply::from(
        send("{\"member_id\": ".into(), "application/x-ndjson")
            .await
            .unwrap(),
    )
    .await
    .assert_error(StatusCode::BAD_REQUEST, "BAD_REQUEST");
}

async fn plans_and_members_of_another_tenant_are_invisible(b: Backend) {
    let app = TestApp::spawn(b).await;
    let acme = app.session("acme", "tenant:configure claims:read").await;
    let other = app.session("globex", "tenant:configure claims:read").await;
    post(&app, &acme.access, "/plans", ppo()).await;
    post(&app, &acme.access, "/members", member("MBR-1", "PPO")).await;
    app.get("/plans/PPO", &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    app.get("/members/MBR-1", &other.access)
        .await
        .assert_error(StatusCode::NOT_FOUND, "NOT_FOUND");
    assert_eq!(
        app.get("/plans", &other.access).await.body["data"],
        json!([])
    );
    // Another tenant's plan is no plan here.
    let r = post(&app, &other.access, "/members", member("MBR-1", "PPO")).await;
    assert_eq!(
        r.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "VALIDATION_ERROR")
            .as_deref(),
        Some("plan_id")
    );
    // The same ids are free in another tenant.
    assert_eq!(
        post(&app, &other.access, "/plans", ppo()).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        post(&app, &other.access, "/members", member("MBR-1", "PPO"))
            .await
            .status,
        StatusCode::CREATED
    );
}

async fn writes_need_tenant_configure_and_reads_claims_read(b: Backend) {
    let app = TestApp::spawn(b).await;
    let reader = app.session("acme", "claims:read").await;
    let writer = app.session("acme", "tenant:configure").await;
    post(&app, &reader.access, "/plans", ppo())
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    post(&app, &reader.access, "/members/import", json!([]))
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert_eq!(
        post(&app, &writer.access, "/plans", ppo()).await.status,
        StatusCode::CREATED
    );
    app.get("/plans/PPO", &writer.access)
        .await
        .assert_error(StatusCode::FORBIDDEN, "INSUFFICIENT_SCOPE");
    assert_eq!(
        app.get("/plans/PPO", &reader.access).await.status,
        StatusCode::OK
    );
}
