//! `/payments` (contract part 2: Standard formats): payment runs, a payment, and its
//! 835 remittance.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pipeline::clock::now_ms;
use pipeline::store::StoreError;
use schemas::payment::{PaymentRunRequest, PaymentRunView, PaymentView};
use schemas::x12::envelope::Stamp;
use schemas::x12::remit835::{self, Remittance};
use schemas::{Date, ErrorBody};

use super::x12::edi;
use crate::auth::principal::scope::{ClaimsRead, ClaimsWrite};
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

fn payment_not_found() -> ApiError {
    ApiError::Refused {
        status: StatusCode::NOT_FOUND,
        code: "NOT_FOUND",
        message: "no such payment".into(),
        field: None,
    }
}

/// Pay every payable claim (`ADJUDICATED`, or `APPROVED` by an officer) decided on or
/// before `through` and not paid yet: one payment per provider.
///
/// The run, its payments, their claims and their `payment.issued` events are written in
/// one transaction; a claim is paid once, ever. A run with nothing to pay answers 201
/// with no payments.
#[utoipa::path(post, path = "/payments/runs", tag = "payments",
    security(("bearer" = ["claims:write"])),
    request_body = PaymentRunRequest,
    responses(
        (status = 201, description = "The run and its payments", body = PaymentRunView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 409, description = "`CONFLICT`: another run paid some of the same claims at the same moment; run again", body = ErrorBody),
        (status = 422, description = "`VALIDATION_ERROR` on `through` (in the future)", body = ErrorBody),
    ))]
pub async fn create_run(
    State(state): State<AppState>,
    who: Authorized<ClaimsWrite>,
    Json(body): Json<PaymentRunRequest>,
) -> Result<Response, ApiError> {
    if body.through > Date::today_utc() {
        return Err(ApiError::validation("through", "must not be in the future"));
    }
    let run = pipeline::payments::run(
        &state.store,
        &state.bus,
        &state.topics,
        &who.tenant_id,
        body.through,
        &who.user_id,
    )
    .await
    .map_err(|e| match e {
        StoreError::Conflict(_) => ApiError::conflict(
            "another payment run paid some of these claims at the same moment; run again",
        ),
        other => other.into(),
    })?;
    tracing::info!(tenant_id = %who.tenant_id, run_id = %run.run_id, payments = run.payments.len(), "Payment run made.");
    Ok((StatusCode::CREATED, Json(run)).into_response())
}

/// A payment with the claims it pays.
#[utoipa::path(get, path = "/payments/{payment_id}", tag = "payments",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The payment", body = PaymentView),
        (status = 404, description = "`NOT_FOUND`", body = ErrorBody),
    ))]
pub async fn get_payment(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(payment_id): Path<String>,
) -> Result<Json<PaymentView>, ApiError> {
    state
        .store
        .payment(&who.tenant_id, &payment_id)
        .await?
        .map(Json)
        .ok_or_else(payment_not_found)
}

/// The payment's 835 remittance advice (005010X221A1): a CLP per claim, an SVC per line
/// with its CAS adjustments.
#[utoipa::path(get, path = "/payments/{payment_id}/835", tag = "payments",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The 835", body = String, content_type = "application/edi-x12"),
        (status = 404, description = "`NOT_FOUND`", body = ErrorBody),
    ))]
pub async fn get_835(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(payment_id): Path<String>,
) -> Result<Response, ApiError> {
    let payment = state
        .store
        .payment(&who.tenant_id, &payment_id)
        .await?
        .ok_or_else(payment_not_found)?;
    let provider = state
        .store
        .provider(&who.tenant_id, &payment.provider_id)
        .await?;
    let mut claims = Vec::with_capacity(payment.claims.len());
    for id in &payment.claims {
        let claim = state
            .store
            .claim(&who.tenant_id, id)
            .await?
            .ok_or_else(|| {
                ApiError::internal(StoreError::Corrupt(format!(
                    "payment {payment_id} pays claim {id}, which is gone"
                )))
            })?;
        claims.push(claim);
    }
    let name = provider
        .as_ref()
        .map_or(payment.provider_id.as_str(), |p| p.name.as_str());
    let who_is = Remittance {
        payer_id: &who.tenant_id,
        payee_name: name,
        payee_npi: provider.as_ref().and_then(|p| p.npi.as_deref()),
    };
    // The payment's issue time stamps the 835, so that it reads the same every time.
    let issued = time::OffsetDateTime::parse(
        &payment.issued_at,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    .unwrap_or_else(|_| now_ms());
    let control = (issued / 1000).rem_euclid(999_999_999) as u32 + 1;
    let text = remit835::render(
        &payment,
        &who_is,
        &claims,
        Stamp::from_unix_ms(issued),
        control,
    );
    Ok(edi(text))
}
