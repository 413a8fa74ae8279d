//! The topics of the pipeline, named with an optional prefix so that several
//! deployments (or tests) can share one broker.

use schemas::avro;

use crate::bus::TopicSpec;

/// How long `claims.events` keeps its records: a webhook replay reaches this far back,
/// as far as the delivery log's default retention.
pub const EVENTS_RETENTION: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Clone)]
pub struct Topics {
    /// Claims produced straight onto Kafka by payers, not yet checked.
    pub submissions: TopicSpec,
    /// Submissions refused, with the error body REST intake would have answered.
    pub rejects: TopicSpec,
    /// Accepted claims' commands, from REST or from `submissions`. Like `decided` and
    /// `workflow`, a topic of record: `claims replay` rebuilds the snapshots from them.
    pub intake: TopicSpec,
    /// Claims checked against their contract, with provider and contract facts.
    pub validated: TopicSpec,
    /// Claims with their rulebook verdict, keyed by member for the fraud stage.
    pub evaluated: TopicSpec,
    /// Claims with their fraud score.
    pub scored: TopicSpec,
    /// Decisions, for the snapshot writer.
    pub decided: TopicSpec,
    /// Domain events (`claim.completed`, …), for webhooks and analysts; kept for
    /// [`EVENTS_RETENTION`], as far back as a webhook replay reaches.
    pub events: TopicSpec,
    /// Officers' decisions on review tasks, keyed like the claim.
    pub workflow: TopicSpec,
    /// Fraud state per provider and per member (compacted).
    pub fraud_providers: TopicSpec,
    pub fraud_members: TopicSpec,
    /// Members' accumulators, a record per claim counted in a member's year
    /// (compacted).
    pub accumulators: TopicSpec,
    /// Received uploads waiting for the scan stage.
    pub uploads: TopicSpec,
    /// Uploads found clean, waiting for OCR.
    pub uploads_scanned: TopicSpec,
    /// Payments of payment runs, for analysts and payment systems.
    pub payments: TopicSpec,
    /// 837 interchanges taken, with their 999 and 277CA.
    pub x12_acks: TopicSpec,
    /// Records no stage could decode, kept for an operator: their bytes as they were
    /// read, so it has no schema.
    pub dead_letter: TopicSpec,
}

impl Topics {
    pub fn new(prefix: &str, partitions: u32) -> Self {
        let name = |n: &str| format!("{prefix}{n}");
        let stream = |n: &str| TopicSpec::new(name(n), partitions, false);
        let state = |n: &str| TopicSpec::new(name(n), partitions, true);
        Self {
            submissions: stream("claims.submissions").with_schema(&avro::SUBMISSION),
            rejects: stream("claims.rejects").with_schema(&avro::REJECTED),
            intake: stream("claims.intake")
                .with_schema(&avro::CLAIM_SUBMITTED)
                .kept(),
            validated: stream("claims.validated").with_schema(&avro::CLAIM_IN_PROCESS),
            evaluated: stream("claims.evaluated").with_schema(&avro::CLAIM_IN_PROCESS),
            scored: stream("claims.scored").with_schema(&avro::CLAIM_IN_PROCESS),
            decided: stream("claims.decided").with_schema(&avro::DECISION).kept(),
            events: stream("claims.events")
                .with_schema(&avro::DOMAIN_EVENT)
                .retained(EVENTS_RETENTION),
            workflow: stream("claims.workflow")
                .with_schema(&avro::OFFICER_DECISION)
                .kept(),
            fraud_providers: state("state.fraud-providers").with_schema(&avro::PROVIDER_STATS),
            fraud_members: state("state.fraud-members").with_schema(&avro::MEMBER_STATE),
            accumulators: state("state.accumulators").with_schema(&avro::ACCUMULATOR),
            uploads: stream("uploads.received").with_schema(&avro::UPLOAD),
            uploads_scanned: stream("uploads.scanned").with_schema(&avro::UPLOAD),
            payments: stream("claims.payments").with_schema(&avro::PAYMENT),
            x12_acks: stream("claims.x12-acks").with_schema(&avro::X12_ACK),
            dead_letter: TopicSpec::new(name("claims.dead-letter"), 1, false),
        }
    }
}

impl Topics {
    /// Every topic, for maintenance and listings.
    pub fn all(&self) -> Vec<TopicSpec> {
        vec![
            self.submissions.clone(),
            self.rejects.clone(),
            self.intake.clone(),
            self.validated.clone(),
            self.evaluated.clone(),
            self.scored.clone(),
            self.decided.clone(),
            self.events.clone(),
            self.workflow.clone(),
            self.fraud_providers.clone(),
            self.fraud_members.clone(),
            self.accumulators.clone(),
            self.uploads.clone(),
            self.uploads_scanned.clone(),
            self.payments.clone(),
            self.x12_acks.clone(),
            self.dead_letter.clone(),
        ]
    }
}

impl Default for Topics {
    fn default() -> Self {
        Self::new("", 8)
    }
}
