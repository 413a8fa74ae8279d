-- Audit records form one hash chain per tenant: seq numbers them from 1, prev_hash is
-- the hash of record seq-1, hash covers the record's canonical form. The head holds
-- the last seq and hash, so appends chain on and a removed tail is detectable.
-- Records written before this migration have no seq and stay outside the chain.
ALTER TABLE audit_records ADD COLUMN seq BIGINT;
ALTER TABLE audit_records ADD COLUMN prev_hash TEXT;
ALTER TABLE audit_records ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX audit_by_seq ON audit_records (tenant_id, seq);

CREATE TABLE audit_heads (
    tenant_id TEXT PRIMARY KEY,
    seq       BIGINT NOT NULL,
    hash      TEXT NOT NULL
);

-- An officer's review: who holds the task, what they decided and when.
ALTER TABLE review_tasks ADD COLUMN decision TEXT;
ALTER TABLE review_tasks ADD COLUMN decided_at BIGINT;
ALTER TABLE review_tasks ADD COLUMN note TEXT;
ALTER TABLE review_tasks ADD COLUMN approved_amount BIGINT;
ALTER TABLE review_tasks ADD COLUMN updated_at BIGINT;
-- The queue: by status, highest priority first, then oldest.
CREATE INDEX review_tasks_queue ON review_tasks (tenant_id, status, priority DESC, created_at, task_id);
