-- What the pipeline's decision writes beside the claim: its fraud analysis, the audit
-- record of the decision, and a review task for a flagged claim.

ALTER TABLE claims ADD COLUMN fraud TEXT;

CREATE TABLE audit_records (
    audit_id    TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    at          BIGINT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    entity_type TEXT NOT NULL,
    entity_id   TEXT NOT NULL,
    details     TEXT NOT NULL
);
CREATE INDEX audit_by_entity ON audit_records (tenant_id, entity_id, at);

CREATE TABLE review_tasks (
    task_id    TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    claim_id   TEXT NOT NULL,
    status     TEXT NOT NULL,
    priority   BIGINT NOT NULL,
    reasons    TEXT NOT NULL,
    assignee   TEXT,
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, claim_id)
);
