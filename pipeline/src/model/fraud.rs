//! A claim's fraud score as the fraud stage gives it and the decision keeps it: a value
//! in [0, 1] explained by the reasons that contributed to it.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FraudReason {
    pub code: String,
    pub contribution: f64,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FraudScore {
    pub fraud_score: f64,
    pub model_version: String,
    pub reasons: Vec<FraudReason>,
}
