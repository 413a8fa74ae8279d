-- Idempotency keys (contract: Conventions). One row per key, scoped by tenant, user,
-- method and path. A row is `running` while its first request runs, holding a lease
-- the request renews; a first attempt that crashed lets the lease lapse, and the next
-- attempt takes the key over. A `done` row holds the response replayed to repeats.
CREATE TABLE idempotency_keys (
    tenant_id     TEXT   NOT NULL,
    user_id       TEXT   NOT NULL,
    method        TEXT   NOT NULL,
    path          TEXT   NOT NULL,
    idem_key      TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL,
    state         TEXT   NOT NULL,
    locked_until  BIGINT NOT NULL,
    status        BIGINT,
    headers       TEXT,
    body          TEXT,
    -- An error response's code, message and field; rendered anew with each replay's
    -- request id.
    error         TEXT,
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, user_id, method, path, idem_key)
);
-- The purge deletes by expiry.
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
