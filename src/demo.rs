//! `claims serve --demo`: a demo tenant and a user holding every scope, so that a
//! newcomer can log in at once, and what a first claim needs: provider `PRV-1` under an
//! active contract, a published example rulebook, and member `MBR-1` on plan
//! `DEMO-PPO` (a 50.00 deductible and 20% coinsurance, so that the first claim shows
//! the member's share). The README's quickstart uses them. The password is new on every start (or taken from `CLAIMS_DEMO_PASSWORD`)
//! and printed, never stored in clear. Seeding is idempotent: a restart keeps the data.
#![allow(clippy::print_stdout)] // telling the newcomer how to log in is the point

use std::net::SocketAddr;

use anyhow::Context;
use api::AppState;
use rand::distributions::Alphanumeric;
use rand::Rng;
use schemas::ScopeSet;
use secrecy::SecretString;

pub const TENANT_ID: &str = "demo";
pub const EMAIL: &str = "demo@example.com";

pub async fn seed(state: &AppState, addr: SocketAddr) -> anyhow::Result<()> {
    let store = &state.store;
    store.ensure_tenant(TENANT_ID, "Demo Health Plan").await?;
    let password = std::env::var("CLAIMS_DEMO_PASSWORD").unwrap_or_else(|_| {
        rand::thread_rng()
            .sample_iter(&Alphanumeric)
            .take(20)
            .map(char::from)
            .collect()
    });
    let scopes = ScopeSet::all().to_space_separated();
    crate::admin::ensure_user(
        store,
        TENANT_ID,
        EMAIL,
        SecretString::from(password.clone()),
        &scopes,
    )
    .await?;
    seed_claims_setup(store).await?;
    let base = format!("http://{addr}/api/v1");
    println!(
        "\nDemo tenant `{TENANT_ID}` is ready.\n  email:    {EMAIL}\n  password: {password}\n  scopes:   {scopes}\n\n\
         Log in:\n  curl -s -X POST {base}/auth/login -H 'Content-Type: application/json' \\\n    \
         -d '{{\"email\":\"{EMAIL}\",\"password\":\"{password}\"}}'\n\n\
         API documentation: {base}/docs\n"
    );
    Ok(())
}

/// The provider of the README's examples.
pub const PROVIDER_ID: &str = "PRV-1";
const ACTOR: &str = "demo";

/// The member and plan of the README's examples.
pub const MEMBER_ID: &str = "MBR-1";
pub const PLAN_ID: &str = "DEMO-PPO";

/// Plan `DEMO-PPO` and member `MBR-1` on it, covered since 2020, unless the tenant has
/// them already.
async fn seed_members(store: &pipeline::store::Store) -> anyhow::Result<()> {
    if store.plan(TENANT_ID, PLAN_ID).await?.is_none() {
        let plan: schemas::plan::CreatePlan = serde_json::from_value(serde_json::json!({
            "plan_id": PLAN_ID, "name": "Demo PPO",
            "benefits": {"deductible": 5000, "coinsurance_pct": 20, "out_of_pocket_max": 200000,
                         "visit_limits": {"97110": 20}}
        }))?;
        plan.validate()
            .map_err(|e| anyhow::anyhow!("the demo plan: {e:?}"))?;
        store.create_plan(TENANT_ID, &plan, ACTOR).await?;
    }
    if store.member(TENANT_ID, MEMBER_ID).await?.is_none() {
        let member: schemas::member::NewMember = serde_json::from_value(serde_json::json!({
            "member_id": MEMBER_ID, "date_of_birth": "1980-02-03", "sex": "F", "plan_id": PLAN_ID,
            "coverage": [{"from": "2020-01-01"}]
        }))?;
        store.create_member(TENANT_ID, &member, ACTOR).await?;
    }
    Ok(())
}

/// Provider `PRV-1` with an active contract (a fee schedule capping procedure 80053 at
/// 40.00), and an example rulebook, published, unless the tenant has them already.
async fn seed_claims_setup(store: &pipeline::store::Store) -> anyhow::Result<()> {
    seed_members(store).await?;
    use pipeline::store::{NewContract, NewProvider};
    if store.provider(TENANT_ID, PROVIDER_ID).await?.is_none() {
        store
            .create_provider(
                NewProvider {
                    tenant_id: TENANT_ID,
                    provider_id: PROVIDER_ID,
                    name: "Demo Cardiology Clinic",
                    npi: None,
                    specialty: Some("cardiology"),
                },
                ACTOR,
            )
            .await?;
        let fee_schedule = std::collections::BTreeMap::from([("80053".to_owned(), 4000)]);
        store
            .create_contract(
                NewContract {
                    tenant_id: TENANT_ID,
                    provider_id: PROVIDER_ID,
                    contract_id: "ctr_demo",
                    effective_from: schemas::date::Date::from_ymd(2020, 1, 1)
                        .context("the demo contract's start date")?,
                    effective_to: None,
                    fee_schedule: &fee_schedule,
                },
                ACTOR,
            )
            .await?;
    }
    if store.active_rulebook(TENANT_ID).await?.is_none() {
        let rule = |rule_id: &str, when: &str, action, reason_code: &str, description: &str| {
            schemas::rulebook::Rule {
                rule_id: rule_id.into(),
                description: description.into(),
                when: when.into(),
                action,
                reason_code: reason_code.into(),
                approved_amount: None,
                carc: None,
                rarc: None,
            }
        };
        use schemas::rulebook::RuleAction::{Block, Decline, Flag};
        let rules = [
            rule(
                "huge",
                "claim.claim_amount > 5000000",
                Block,
                "AMOUNT_LIMIT",
                "Claims over 50,000.00 are never paid automatically",
            ),
            rule(
                "cosmetic",
                "'Z41.1' in claim.diagnosis_codes",
                Decline,
                "NOT_COVERED",
                "Cosmetic procedures are not covered",
            ),
            rule(
                "large",
                "claim.claim_amount > 100000",
                Flag,
                "HIGH_AMOUNT",
                "Claims over 1,000.00 are reviewed by an officer",
            ),
        ];
        pipeline::rules::compile(&rules).map_err(|e| anyhow::anyhow!("the demo rulebook: {e}"))?;
        store
            .create_rulebook(TENANT_ID, "rb_demo", "Demo rules", &rules, ACTOR)
            .await?;
        store.publish_rulebook(TENANT_ID, "rb_demo", ACTOR).await?;
    }
    Ok(())
}
