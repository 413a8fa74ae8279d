//! The OpenAPI 3.1 document, generated from the handlers' annotations.
//!
//! Routes are registered only through [`routes`], which adds each handler to the router
//! and its annotation to the document in one step, so the two cannot drift apart. The
//! conventions every operation shares (request-id and rate-limit headers, the error
//! responses of authentication and of the server) are added here once, by
//! [`apply_conventions`], rather than repeated on every handler.

use std::sync::LazyLock;

use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, HeaderBuilder, ObjectBuilder, OpenApi as Doc, Ref, ResponseBuilder, Type,
};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::routes::{
    audit, auth, claims, health, operations, providers, rulebooks, tenant_settings, uploads, users,
    webhooks, well_known, workflow,
};
use crate::state::AppState;

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
        (name = "rulebooks", description = "Rulebooks of CEL rules, drafts and publishing"),
        (name = "webhooks", description = "Event subscriptions, their delivery log and redelivery"),
        (name = "workflow", description = "The claims officers' review queue"),
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
        .routes(routes!(
            rulebooks::create_rulebook,
            rulebooks::list_rulebooks
        ))
        .routes(routes!(rulebooks::active_rulebook))
        .routes(routes!(rulebooks::get_rulebook))
        .routes(routes!(rulebooks::publish_rulebook))
        .routes(routes!(claims::intake))
        .routes(routes!(claims::batch))
        .routes(routes!(claims::list_claims))
        .routes(routes!(claims::get_claim))
        .routes(routes!(claims::get_fraud))
        .routes(routes!(uploads::upload, uploads::list_uploads))
        .routes(routes!(uploads::get_upload))
        .routes(routes!(webhooks::create_webhook, webhooks::list_webhooks))
        .routes(routes!(
            webhooks::get_webhook,
            webhooks::patch_webhook,
            webhooks::delete_webhook
        ))
        .routes(routes!(webhooks::list_deliveries))
        .routes(routes!(webhooks::redeliver))
        .routes(routes!(workflow::list_tasks))
        .routes(routes!(workflow::get_task))
        .routes(routes!(workflow::claim_task))
        .routes(routes!(workflow::transition_task))
        .routes(routes!(audit::list_audit))
        .routes(routes!(audit::get_audit))
        .routes(routes!(health::live))
        .routes(routes!(health::ready))
        .routes(routes!(operations::openapi_json))
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
        if let Some(op) = &mut item.post {
            let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
            if secured {
                op.parameters.get_or_insert_with(Vec::new).push(
                    ParameterBuilder::new()
                        .name("Idempotency-Key")
                        .parameter_in(ParameterIn::Header)
                        .description(Some("1-255 characters. A repeat with the same body within 24 hours replays the first response with `Idempotent-Replayed: true`; another body is 422 (field `Idempotency-Key`); a repeat while the first runs is 409 with `Retry-After`"))
                        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                        .build(),
                );
            }
        }
    }
}

fn apply_to_operation(op: &mut Operation) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let error = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build()
    };
    let responses = &mut op.responses.responses;
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
