//! Tenant settings (contract: Tenants and users). Stored as JSON; a stored document
//! missing a field takes the default, so new settings need no data migration.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

/// The settings of one tenant, every field with its default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct TenantSettings {
    /// A claim whose fraud score reaches this is flagged for review (0..1).
    pub fraud_flag_threshold: f64,
    /// Requests per minute the tenant may make.
    pub rate_limit_per_minute: u32,
    /// Largest supporting document accepted, in bytes.
    pub max_upload_bytes: u64,
    /// Claims below this amount (minor units) are approved without review, when set.
    pub auto_approve_below: Option<i64>,
    /// Claims of members not on the tenant's roster are declined (`MEMBER_UNKNOWN`,
    /// CARC 31). Members on the roster are checked against their coverage whatever
    /// this says.
    pub eligibility_required: bool,
    /// Days a webhook delivery keeps its body (1-3,650); older finished deliveries lose
    /// it, and their attempts' status rows stay.
    pub delivery_log_retention_days: u32,
}

impl TenantSettings {
    pub const MAX_RATE_LIMIT_PER_MINUTE: u32 = 100_000_000;
    pub const MAX_UPLOAD_BYTES: u64 = 1 << 30;
    pub const MAX_RETENTION_DAYS: u32 = 3650;
}

impl Default for TenantSettings {
    fn default() -> Self {
        Self {
            fraud_flag_threshold: 0.8,
            rate_limit_per_minute: 60_000,
            max_upload_bytes: 25 * 1024 * 1024,
            auto_approve_below: None,
            eligibility_required: false,
            delivery_log_retention_days: 30,
        }
    }
}

/// `PATCH /tenant/settings`: only the fields present change; `auto_approve_below: null`
/// clears that setting.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantSettingsPatch {
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub fraud_flag_threshold: Option<f64>,
    #[schema(minimum = 1, maximum = 100_000_000)]
    pub rate_limit_per_minute: Option<u32>,
    #[schema(minimum = 1, maximum = 1_073_741_824_u64)]
    pub max_upload_bytes: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub auto_approve_below: Option<Option<i64>>,
    pub eligibility_required: Option<bool>,
    #[schema(minimum = 1, maximum = 3650)]
    pub delivery_log_retention_days: Option<u32>,
}

/// Tells a field given as `null` (Some(None)) from a field left out (None).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// A setting out of its range: the field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSetting {
    pub field: &'static str,
    pub message: &'static str,
}

impl TenantSettingsPatch {
    /// The settings after this patch, or the first field out of range.
    pub fn apply(&self, current: &TenantSettings) -> Result<TenantSettings, InvalidSetting> {
        let mut next = current.clone();
        if let Some(t) = self.fraud_flag_threshold {
            if !(0.0..=1.0).contains(&t) {
                return Err(InvalidSetting {
                    field: "fraud_flag_threshold",
                    message: "must be between 0 and 1",
                });
            }
            next.fraud_flag_threshold = t;
        }
        if let Some(r) = self.rate_limit_per_minute {
            if r == 0 || r > TenantSettings::MAX_RATE_LIMIT_PER_MINUTE {
                return Err(InvalidSetting {
                    field: "rate_limit_per_minute",
                    message: "must be between 1 and 100000000",
                });
            }
            next.rate_limit_per_minute = r;
        }
        if let Some(m) = self.max_upload_bytes {
            if m == 0 || m > TenantSettings::MAX_UPLOAD_BYTES {
                return Err(InvalidSetting {
                    field: "max_upload_bytes",
                    message: "must be between 1 and 1073741824",
                });
            }
            next.max_upload_bytes = m;
        }
        if let Some(a) = self.auto_approve_below {
            if a.is_some_and(|v| v <= 0) {
                return Err(InvalidSetting {
                    field: "auto_approve_below",
                    message: "must be a positive amount in minor units, or null",
                });
            }
            next.auto_approve_below = a;
        }
        if let Some(e) = self.eligibility_required {
            next.eligibility_required = e;
        }
        if let Some(d) = self.delivery_log_retention_days {
            if d == 0 || d > TenantSettings::MAX_RETENTION_DAYS {
                return Err(InvalidSetting {
                    field: "delivery_log_retention_days",
                    message: "must be between 1 and 3650 days",
                });
            }
            next.delivery_log_retention_days = d;
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patch(json: &str) -> TenantSettingsPatch {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn applies_present_fields_only() {
        let next = patch(r#"{"fraud_flag_threshold":0.5}"#)
            .apply(&TenantSettings::default())
            .unwrap();
        assert_eq!(next.fraud_flag_threshold, 0.5);
        assert_eq!(next.rate_limit_per_minute, 60_000);
    }

    #[test]
    fn null_clears_auto_approve() {
        let set = patch(r#"{"auto_approve_below":5000}"#)
            .apply(&TenantSettings::default())
            .unwrap();
        assert_eq!(set.auto_approve_below, Some(5000));
        let cleared = patch(r#"{"auto_approve_below":null}"#).apply(&set).unwrap();
        assert_eq!(cleared.auto_approve_below, None);
        let kept = patch("{}").apply(&set).unwrap();
        assert_eq!(kept.auto_approve_below, Some(5000));
    }

    #[test]
    fn refuses_out_of_range_values() {
        let d = TenantSettings::default();
        assert_eq!(
            patch(r#"{"fraud_flag_threshold":1.5}"#)
                .apply(&d)
                .unwrap_err()
                .field,
            "fraud_flag_threshold"
        );
        assert_eq!(
            patch(r#"{"rate_limit_per_minute":0}"#)
                .apply(&d)
                .unwrap_err()
                .field,
            "rate_limit_per_minute"
        );
        assert_eq!(
            patch(r#"{"max_upload_bytes":0}"#)
                .apply(&d)
                .unwrap_err()
                .field,
            "max_upload_bytes"
        );
        assert_eq!(
            patch(r#"{"auto_approve_below":-1}"#)
                .apply(&d)
                .unwrap_err()
                .field,
            "auto_approve_below"
        );
    }

    #[test]
    fn a_stored_document_missing_fields_takes_defaults() {
        let s: TenantSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(s, TenantSettings::default());
    }
}
