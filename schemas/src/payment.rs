//! Payment runs (contract part 2, Standard formats): every payable claim decided up to a
//! date and not paid yet, one payment per provider, each with its 835.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::date::Date;

/// `POST /payments/runs`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PaymentRunRequest {
    /// Claims decided on or before this day (UTC) are paid.
    #[schema(value_type = String, format = Date)]
    pub through: Date,
}

/// One provider's payment.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PaymentView {
    pub payment_id: String,
    pub run_id: String,
    pub provider_id: String,
    /// Minor units: the sum of the claims' approved amounts.
    pub amount: i64,
    /// The claims it pays, by id.
    pub claims: Vec<String>,
    /// The 835's TRN02: the number the provider reconciles the payment by.
    pub trace_number: String,
    pub issued_at: String,
}

/// What a run paid: a payment per provider, none when nothing was payable.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PaymentRunView {
    pub run_id: String,
    #[schema(value_type = String, format = Date)]
    pub through: Date,
    pub payments: Vec<PaymentView>,
}
