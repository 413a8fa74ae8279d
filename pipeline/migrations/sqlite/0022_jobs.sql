-- Bulk jobs (POST /claims/reprocess): the job and one row per claim it covers. An
-- item leaves `pending` in the same transaction that queues its claim's new decision,
-- so a job resumed after a crash redoes exactly the items not yet queued.
CREATE TABLE jobs (
    tenant_id        TEXT NOT NULL,
    job_id           TEXT NOT NULL,
    kind             TEXT NOT NULL,
    state            TEXT NOT NULL,
    rulebook_id      TEXT NOT NULL,
    rulebook_version BIGINT NOT NULL,
    total            BIGINT NOT NULL,
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    PRIMARY KEY (job_id)
);
CREATE INDEX jobs_by_state ON jobs (state, created_at);

CREATE TABLE job_items (
    job_id   TEXT NOT NULL,
    claim_id TEXT NOT NULL,
    state    TEXT NOT NULL,
    reason   TEXT,
    PRIMARY KEY (job_id, claim_id)
);
CREATE INDEX job_items_by_state ON job_items (job_id, state);
