//! Whether a claim's member may have it paid (contract part 2: the tenant setting
//! `eligibility_required`). A member on the roster is checked against their coverage
//! on the service date whatever the setting; a member not on the roster is refused only
//! when the tenant requires eligibility.

use schemas::adjudication::carc;
use schemas::member::Member;
use schemas::receipt::EligibilityStatus;
use schemas::Date;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eligibility {
    /// On the roster and covered on the service date.
    Covered,
    /// On the roster, not covered on the service date.
    NotCovered,
    /// Not on the roster, and the tenant requires eligibility.
    Unknown,
    /// Not on the roster; the tenant does not require eligibility.
    Unlisted,
}

impl Eligibility {
    /// As the decision receipt tells it.
    pub fn status(self) -> EligibilityStatus {
        match self {
            Eligibility::Covered => EligibilityStatus::Covered,
            Eligibility::NotCovered => EligibilityStatus::NotCovered,
            Eligibility::Unknown => EligibilityStatus::Unknown,
            Eligibility::Unlisted => EligibilityStatus::Unlisted,
        }
    }

    /// From the status a decision recorded (a claim decided again on its facts).
    pub fn of_status(status: EligibilityStatus) -> Self {
        match status {
            EligibilityStatus::Covered => Eligibility::Covered,
            EligibilityStatus::NotCovered => Eligibility::NotCovered,
            EligibilityStatus::Unknown => Eligibility::Unknown,
            EligibilityStatus::Unlisted => Eligibility::Unlisted,
        }
    }

    /// The decline a refusal ends in: reason code and CARC.
    pub fn refusal(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Eligibility::NotCovered => Some((
                "MEMBER_NOT_COVERED",
                carc::NOT_COVERED,
                "the member is not covered on the service date",
            )),
            Eligibility::Unknown => Some((
                "MEMBER_UNKNOWN",
                carc::MEMBER_UNKNOWN,
                "the member is not on the tenant's roster",
            )),
            Eligibility::Covered | Eligibility::Unlisted => None,
        }
    }
}

pub fn eligibility(member: Option<&Member>, service_date: Date, required: bool) -> Eligibility {
    match member {
        Some(m) if m.covered_on(service_date) => Eligibility::Covered,
        Some(_) => Eligibility::NotCovered,
        None if required => Eligibility::Unknown,
        None => Eligibility::Unlisted,
    }
}
