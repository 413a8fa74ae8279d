//! The topics of the pipeline, named with an optional prefix so that several
//! deployments (or tests) can share one broker.

use crate::bus::TopicSpec;

#[derive(Debug, Clone)]
pub struct Topics {
    /// Claim commands from REST or straight from payers.
    pub intake: TopicSpec,
}

impl Topics {
    pub fn new(prefix: &str, partitions: u32) -> Self {
        let name = |n: &str| format!("{prefix}{n}");
        Self {
            intake: TopicSpec::new(name("claims.intake"), partitions, false),
        }
    }
}

impl Default for Topics {
    fn default() -> Self {
        Self::new("", 8)
    }
}
