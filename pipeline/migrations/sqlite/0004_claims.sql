-- Claim snapshots: the queryable state of each claim, written at intake and by the
-- pipeline's snapshot writer (guarded by `version`, so a redelivered older update never
-- overwrites a newer one).

CREATE TABLE claims (
    tenant_id        TEXT NOT NULL REFERENCES tenants (tenant_id),
    claim_id         TEXT NOT NULL,
    member_id        TEXT NOT NULL,
    provider_id      TEXT NOT NULL,
    claim_amount     BIGINT NOT NULL,
    service_date     TEXT NOT NULL,
    submission       TEXT NOT NULL,
    rulebook_id      TEXT NOT NULL,
    rulebook_version BIGINT NOT NULL,
    status           TEXT NOT NULL,
    outcome          TEXT,
    approved_amount  BIGINT,
    fraud_score      DOUBLE PRECISION,
    audit_id         TEXT,
    reasons          TEXT NOT NULL DEFAULT '[]',
    task_id          TEXT,
    received_at      BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    version          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, claim_id)
);
CREATE INDEX claims_by_received ON claims (tenant_id, received_at, claim_id);
CREATE INDEX claims_by_status ON claims (tenant_id, status, received_at);
