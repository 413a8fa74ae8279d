//! Bulk reprocessing (contract part 2, "Decisions you can explain, test and redo"):
//! `POST /claims/reprocess` starts a job, `GET /jobs/{job_id}` tells its progress.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /claims/reprocess`: which claims, decided again with which rulebook. The
/// contract names one choice of each: the claims pending review, the active rulebook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReprocessRequest {
    /// `pending_review`.
    pub status: String,
    /// `active`.
    pub rulebook: String,
}

/// 202 to `POST /claims/reprocess`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReprocessAccepted {
    pub job_id: String,
    /// The claims the job decides again.
    pub claims: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Done,
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(JobState::Running),
            "done" => Some(JobState::Done),
            "failed" => Some(JobState::Failed),
            _ => None,
        }
    }
}

/// `GET /jobs/{job_id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    pub job_id: String,
    pub state: JobState,
    pub total: i64,
    /// Claims decided again (or found decided by an officer meanwhile: nothing to redo).
    pub done: i64,
    /// Claims that could not be decided again, each with its reason in the job's log.
    pub failed: i64,
}
