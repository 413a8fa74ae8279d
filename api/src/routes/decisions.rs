//! `/claims/{claim_id}/decision` (contract part 2, "Decisions you can explain, test and
//! redo"): the decision receipt.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use pipeline::store::ReceiptLookup;
use schemas::receipt::DecisionReceipt;
use schemas::ErrorBody;

use super::claims::claim_not_found;
use crate::auth::principal::scope::ClaimsRead;
use crate::auth::Authorized;
use crate::http::error::ApiError;
use crate::http::json::Json;
use crate::state::AppState;

/// Why a claim was decided as it was: every rule of its rulebook in order, the fraud
/// score with its reasons, the member's eligibility and the lines' adjudications, read
/// from the decision's audit record.
#[utoipa::path(get, path = "/claims/{claim_id}/decision", tag = "claims",
    security(("bearer" = ["claims:read"])),
    responses(
        (status = 200, description = "The receipt of the claim's current decision", body = DecisionReceipt),
        (status = 404, description = "`CLAIM_NOT_FOUND`, or `NOT_FOUND` while the claim is not decided yet", body = ErrorBody),
    ))]
pub async fn get_decision(
    State(state): State<AppState>,
    who: Authorized<ClaimsRead>,
    Path(claim_id): Path<String>,
) -> Result<Json<DecisionReceipt>, ApiError> {
    match state
        .store
        .decision_receipt(&who.tenant_id, &claim_id)
        .await?
    {
        ReceiptLookup::Found(r) => Ok(Json(*r)),
        ReceiptLookup::NoClaim => Err(claim_not_found()),
        ReceiptLookup::Undecided => Err(ApiError::Refused {
            status: StatusCode::NOT_FOUND,
            code: "NOT_FOUND",
            message: "the claim has not been decided yet".into(),
            field: None,
        }),
    }
}
