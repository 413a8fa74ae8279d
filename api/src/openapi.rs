//! The OpenAPI 3.1 document, generated from the handlers' annotations.
//!
//! Routes are registered only through [`routes`], which adds each handler to the router
//! and its annotation to the document in one step, so the two cannot drift apart. The
//! conventions every operation shares (request-id and rate-limit headers, the error
//! responses of authentication and of the server) are added here once, by
//! [`apply_conventions`], rather than repeated on every handler.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{AllOf, ArrayItems, Object, Schema};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, ObjectBuilder, OpenApi as Doc, Ref, RefOr, ResponseBuilder, Type,
};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::routes::{
    audit, auth, backtests, claims, decisions, fhir, health, jobs, members, operations, payments,
    plans, providers, rulebooks, tenant_settings, uploads, users, webhooks, well_known, workflow,
    x12,
};
use crate::state::AppState;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Claims Service API",
        version = "1.0.0",
        description = "Multi-tenant health-claims processing. Paths are relative to /api/v1. \
                       Errors have the body {\"error\": {code, message, field?, request_id}}."
    ),
    servers((url = "/api/v1")),
    components(schemas(schemas::ErrorBody, schemas::ErrorDetail)),
    tags(
        (name = "auth", description = "Login, token refresh, logout and the verification keys"),
        (name = "tenant", description = "Tenant settings and users"),
        (name = "claims", description = "Claim intake and reads"),
        (name = "uploads", description = "Supporting documents: virus scan and OCR"),
        (name = "providers", description = "Providers and their contracts"),
        (name = "members", description = "Benefit plans, members and their coverage"),
        (name = "rulebooks", description = "Rulebooks of CEL rules, drafts and publishing"),
        (name = "webhooks", description = "Event subscriptions, their delivery log and redelivery"),
        (name = "workflow", description = "The claims officers' review queue"),
        (name = "payments", description = "Payment runs and their 835 remittances"),
        (name = "audit", description = "The tenant's hash-chained audit log"),
        (name = "operations", description = "Health, metrics and this document"),
    )
)]
struct ApiDoc;

/// Every route of the API, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(auth::login))
        .routes(routes!(auth::refresh))
        .routes(routes!(auth::logout))
        .routes(routes!(well_known::jwks))
        .routes(routes!(
            tenant_settings::get_settings,
            tenant_settings::patch_settings
        ))
        .routes(routes!(users::create_user, users::list_users))
        .routes(routes!(users::patch_user, users::delete_user))
        .routes(routes!(
            providers::create_provider,
            providers::list_providers
        ))
        .routes(routes!(providers::get_provider))
        .routes(routes!(
            providers::create_contract,
            providers::list_contracts
        ))
        .routes(routes!(providers::patch_contract))
        .routes(routes!(plans::create_plan, plans::list_plans))
        .routes(routes!(plans::get_plan, plans::patch_plan))
        .routes(routes!(members::create_member))
        .routes(routes!(members::import_members))
        .routes(routes!(members::get_member, members::patch_member))
        .routes(routes!(members::get_accumulators))
        .routes(routes!(
            rulebooks::create_rulebook,
            rulebooks::list_rulebooks
        ))
        .routes(routes!(rulebooks::active_rulebook))
        .routes(routes!(rulebooks::get_rulebook))
        .routes(routes!(rulebooks::publish_rulebook))
        .routes(routes!(backtests::backtest_rulebook))
        .routes(routes!(jobs::reprocess_claims))
        .routes(routes!(jobs::get_job))
        .routes(routes!(claims::intake))
        .routes(routes!(claims::batch))
        .routes(routes!(x12::x12_intake))
        .routes(routes!(x12::get_999))
        .routes(routes!(x12::get_277ca))
        .routes(routes!(payments::create_run))
        .routes(routes!(payments::get_payment))
        .routes(routes!(payments::get_835))
        .routes(routes!(claims::list_claims))
        .routes(routes!(claims::get_claim))
        .routes(routes!(claims::get_fraud))
        .routes(routes!(decisions::get_decision))
        .routes(routes!(fhir::get_fhir))
        .routes(routes!(uploads::upload, uploads::list_uploads))
        .routes(routes!(uploads::get_upload))
        .routes(routes!(webhooks::create_webhook, webhooks::list_webhooks))
        .routes(routes!(
            webhooks::get_webhook,
            webhooks::patch_webhook,
            webhooks::delete_webhook
        ))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(webhooks::webhook_stats))
        .routes(routes!(webhooks::replay_webhook))
        .routes(routes!(webhooks::redeliver))
        .routes(routes!(workflow::list_tasks))
        .routes(routes!(workflow::get_task))
        .routes(routes!(workflow::claim_task))
        .routes(routes!(workflow::transition_task))
        .routes(routes!(audit::list_audit))
        .routes(routes!(audit::get_audit))
        .routes(routes!(health::live))
        .routes(routes!(health::ready))
        .routes(routes!(openapi_json))
        .routes(routes!(operations::docs))
        .routes(routes!(operations::redoc_js))
        .routes(routes!(operations::metrics))
}

/// The finished document.
pub fn document() -> &'static Doc {
    static DOC: LazyLock<Doc> = LazyLock::new(|| {
        let (_, mut doc) = routes().split_for_parts();
        apply_conventions(&mut doc);
        doc
    });
    &DOC
}

pub fn document_json() -> &'static str {
    static JSON: LazyLock<String> = LazyLock::new(|| {
        document()
            .to_pretty_json()
            .unwrap_or_else(|_| "{}".to_owned())
    });
    &JSON
}

/// Adds what every operation shares: the bearer scheme, the request-id and rate-limit
/// headers on every response, and the error responses any operation can give.
pub fn apply_conventions(doc: &mut Doc) {
    let components = doc.components.get_or_insert_with(Default::default);
    flatten_closed_all_of(&mut components.schemas);
    describe_rule_variables(&mut components.schemas);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            Http::builder()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .description(Some(
                    "RS256 access token from POST /auth/login; verify with /.well-known/jwks.json",
                ))
                .build(),
        ),
    );
    for item in doc.paths.paths.values_mut() {
        if let Some(op) = &mut item.post {
            let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
            if secured {
                op.parameters.get_or_insert_with(Vec::new).push(
                    ParameterBuilder::new()
                        .name("Idempotency-Key")
                        .parameter_in(ParameterIn::Header)
                        .description(Some("1-255 characters. A repeat with the same body within 24 hours replays the first response with `Idempotent-Replayed: true`; another body is 422 (field `Idempotency-Key`); a repeat while the first runs is 409 with `Retry-After`"))
                        .schema(Some(
                            ObjectBuilder::new()
                                .schema_type(Type::String)
                                .min_length(Some(1))
                                .max_length(Some(255))
                                .pattern(Some("^[ -~]+$")),
                        ))
                        .build(),
                );
                let responses = &mut op.responses.responses;
                responses.entry("409".into()).or_insert_with(|| {
                    error_response("`CONFLICT`: a request with this `Idempotency-Key` is still running (see `Retry-After`), or the operation's own conflict").into()
                });
                responses.entry("422".into()).or_insert_with(|| {
                    error_response("`VALIDATION_ERROR`: a field or parameter is invalid (`field` names it), such as an `Idempotency-Key` reused with another body").into()
                });
            }
        }
        // After the POSTs' own additions, so that those responses get the headers too.
        for op in [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            apply_to_operation(op);
        }
    }
}

fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

fn apply_to_operation(op: &mut Operation) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let error = error_response;
    let has_body = op.request_body.is_some();
    let has_query = op
        .parameters
        .iter()
        .flatten()
        .any(|p| p.parameter_in == ParameterIn::Query);
    for p in op.parameters.iter_mut().flatten() {
        if p.parameter_in == ParameterIn::Query && p.name == "limit" {
            p.schema = Some(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1))
                    .maximum(Some(500))
                    .default(Some(50.into()))
                    .into(),
            );
        }
        if p.parameter_in == ParameterIn::Path && p.name.ends_with("_id") {
            p.schema = Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(64))
                    .pattern(Some(schemas::CLIENT_ID_PATTERN))
                    .into(),
            );
        }
    }
    let responses = &mut op.responses.responses;
    if has_body {
        responses.entry("400".into()).or_insert_with(|| {
            error("`BAD_REQUEST`: malformed body, wrong content type, or a required field missing (`field` names it)").into()
        });
        responses
            .entry("413".into())
            .or_insert_with(|| error("`PAYLOAD_TOO_LARGE`: the body is over the limit").into());
    }
    if has_body || has_query {
        responses.entry("422".into()).or_insert_with(|| {
            error(
                "`VALIDATION_ERROR`: a field or parameter is present but invalid; `field` names it",
            )
            .into()
        });
    }
    if secured {
        responses
            .entry("401".into())
            .or_insert_with(|| error("Missing or invalid access token (`UNAUTHORIZED`) or an expired one (`TOKEN_EXPIRED`)").into());
        responses.entry("403".into()).or_insert_with(|| {
            error("The token lacks the scope this operation requires (`INSUFFICIENT_SCOPE`)").into()
        });
    }
    responses.entry("429".into()).or_insert_with(|| {
        error("Rate limit exceeded (`RATE_LIMITED`); wait for `Retry-After` seconds").into()
    });
    responses.entry("500".into()).or_insert_with(|| {
        error("Server error (`INTERNAL_ERROR`); no internals are disclosed").into()
    });

    for response in responses.values_mut() {
        if let utoipa::openapi::RefOr::T(r) = response {
            for (name, description) in RESPONSE_HEADERS {
                let schema = if *name == "X-Request-Id" {
                    Type::String
                } else {
                    Type::Integer
                };
                r.headers.entry((*name).to_owned()).or_insert_with(|| {
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(schema))
                        .description(Some(*description))
                        .build()
                });
            }
        }
    }

    let params = op.parameters.get_or_insert_with(Vec::new);
    params.push(
        ParameterBuilder::new()
            .name("X-Request-Id")
            .parameter_in(ParameterIn::Header)
            .description(Some("Echoed in the response and in error bodies when 1-128 characters of [A-Za-z0-9._:-]; generated otherwise"))
            .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
            .build(),
    );
}

const RESPONSE_HEADERS: &[(&str, &str)] = &[
    (
        "X-Request-Id",
        "The request's id; equals `error.request_id` in error bodies",
    ),
    (
        "X-RateLimit-Limit",
        "Requests allowed per minute (the tenant's, or the client address's before authentication)",
    ),
    ("X-RateLimit-Remaining", "Requests that may be made now"),
    (
        "X-RateLimit-Reset",
        "Unix seconds: when the whole allowance is back, or, with none remaining, when the next request is allowed",
    ),
];

/// A schema that serde's `flatten` built as `allOf` of a closed object (one with
/// `additionalProperties: false`, from `deny_unknown_fields`) and more properties can
/// match nothing: the closed part refuses the other part's properties. Every `allOf`
/// of objects, named or nested (a page's items), therefore becomes one object with
/// the properties and required fields of all its parts.
fn flatten_closed_all_of(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    let snapshot = schemas.clone();
    for schema in schemas.values_mut() {
        flatten_in(schema, &snapshot);
    }
}

fn flatten_in(schema: &mut RefOr<Schema>, named: &BTreeMap<String, RefOr<Schema>>) {
    let RefOr::T(inner) = schema else {
        return;
    };
    match inner {
        Schema::AllOf(all_of) => {
            if let Some(merged) = merged_all_of(all_of, named) {
                *schema = RefOr::T(Schema::Object(merged));
            }
        }
        Schema::Object(object) => {
            for property in object.properties.values_mut() {
                flatten_in(property, named);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                flatten_in(items, named);
            }
        }
        _ => {}
    }
}

fn merged_all_of(all_of: &AllOf, named: &BTreeMap<String, RefOr<Schema>>) -> Option<Object> {
    let mut merged = Object::new();
    for part in &all_of.items {
        let resolved = match part {
            RefOr::Ref(r) => named.get(r.ref_location.rsplit('/').next()?)?,
            inline => inline,
        };
        let RefOr::T(Schema::Object(object)) = resolved else {
            return None;
        };
        merged.properties.extend(object.properties.clone());
        merged.required.extend(object.required.iter().cloned());
    }
    merged.schema_type = Type::Object.into();
    merged.description = all_of.description.clone();
    Some(merged)
}

/// The variables a rule's CEL expressions see, with their fields' types, in the
/// description of `Rule.when`: taken from the type check itself, so that the document
/// and the check cannot disagree.
fn describe_rule_variables(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    use pipeline::rules::types::{LINE, VARIABLES};
    let Some(RefOr::T(Schema::Object(rule))) = schemas.get_mut("Rule") else {
        return;
    };
    let mut text = String::from(
        "CEL expression; the rule matches when it is `true`. It is type-checked when the \
         rulebook is created: an unknown field, mixed types or a result that is not a bool \
         is refused with 422 and `field` `rules[i].when`. The variables and their fields:",
    );
    for record in VARIABLES.iter().chain([&&LINE]) {
        let fields: Vec<String> = record
            .fields
            .iter()
            .map(|(name, ty)| format!("`{name}` ({})", ty.describe()))
            .collect();
        let what = if record.name == "line" {
            "each element of `claim.lines`"
        } else {
            "variable"
        };
        text.push_str(&format!(
            "\n- `{}` ({what}): {}",
            record.name,
            fields.join(", ")
        ));
    }
    if let Some(RefOr::T(Schema::Object(when))) = rule.properties.get_mut("when") {
        when.description = Some(text);
    }
}

/// This document: OpenAPI 3.1 generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json")))]
pub async fn openapi_json() -> Response {
    ([(CONTENT_TYPE, "application/json")], document_json()).into_response()
}
