//! Rulebooks (contract: Rulebooks). Rules are CEL expressions over `claim`, `provider`,
//! `contract` and `member_history`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a matching rule does to the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    /// A hard stop: outcome `BLOCKED`.
    Block,
    /// Manual review: outcome `FLAGGED`.
    Flag,
    /// Outcome `DECLINED`.
    Decline,
    /// Sets the approved amount to the rule's `approved_amount` expression.
    Adjust,
    /// Contract part 2: `when` is evaluated once per line (CEL sees `line`); each line
    /// it matches is denied (`CO`, the rule's CARC, `96` by default).
    #[serde(rename = "deny_line")]
    DenyLine,
}

impl RuleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Block => "block",
            RuleAction::Flag => "flag",
            RuleAction::Decline => "decline",
            RuleAction::Adjust => "adjust",
            RuleAction::DenyLine => "deny_line",
        }
    }
}

/// One rule as written by the tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique within the rulebook.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,64}$", min_length = 1, max_length = 64)]
    pub rule_id: String,
    #[serde(default)]
    #[schema(max_length = 1000)]
    pub description: String,
    /// CEL expression; the rule matches when it is `true`.
    #[schema(min_length = 1, max_length = 4096)]
    pub when: String,
    pub action: RuleAction,
    /// Recorded in the claim's `reasons` when the rule matches.
    #[schema(pattern = "^[A-Za-z0-9._:-]{1,64}$", min_length = 1, max_length = 64)]
    pub reason_code: String,
    /// CEL expression giving the approved amount (minor units); `adjust` rules only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 4096)]
    pub approved_amount: Option<String>,
    /// The Claim Adjustment Reason Code the adjustments this rule causes carry (contract
    /// part 2); by default `A1` for a block, `96` for a decline, `45` for an adjust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Z0-9]{1,3}$")]
    pub carc: Option<String>,
    /// A Remittance Advice Remark Code to go with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Z0-9]{2,5}$")]
    pub rarc: Option<String>,
}

/// Whether `code` is an adjustment code of `min..=max` capital letters and digits.
pub fn is_code(code: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// `POST /rulebooks`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRulebook {
    /// 1-200 characters.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// At most 1,000 rules, evaluated in order.
    #[schema(max_items = 1000)]
    pub rules: Vec<Rule>,
}

/// `draft` when created; `active` once published; `retired` when another rulebook of
/// the tenant is published after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RulebookStatus {
    Draft,
    Active,
    Retired,
}

impl RulebookStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RulebookStatus::Draft => "draft",
            RulebookStatus::Active => "active",
            RulebookStatus::Retired => "retired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "draft" => Some(Self::Draft),
            "active" => Some(Self::Active),
            "retired" => Some(Self::Retired),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Rulebook {
    pub rulebook_id: String,
    /// One higher for each rulebook the tenant creates.
    pub version: i64,
    pub name: String,
    pub status: RulebookStatus,
    pub rules: Vec<Rule>,
    pub created_at: String,
    pub published_at: Option<String>,
}
