-- Webhook subscriptions, one row per delivery (an event to a subscription) with its
-- durable retry schedule, and the log of attempts.

CREATE TABLE webhooks (
    webhook_id TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    url        TEXT NOT NULL,
    events     TEXT NOT NULL,
    secret     TEXT NOT NULL,
    enabled    BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX webhooks_by_tenant ON webhooks (tenant_id, webhook_id);

-- state: pending (next_attempt_at set), delivered, failed (schedule spent) or
-- cancelled (subscription deleted). failures counts the failed attempts of the current
-- schedule; a redelivery starts a new schedule.
CREATE TABLE webhook_deliveries (
    delivery_id     TEXT PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    webhook_id      TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    state           TEXT NOT NULL,
    attempts        BIGINT NOT NULL,
    failures        BIGINT NOT NULL,
    next_attempt_at BIGINT,
    created_at      BIGINT NOT NULL,
    UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);

CREATE TABLE webhook_attempts (
    delivery_id     TEXT NOT NULL,
    attempt         BIGINT NOT NULL,
    tenant_id       TEXT NOT NULL,
    webhook_id      TEXT NOT NULL,
    status_code     BIGINT,
    error           TEXT,
    duration_ms     BIGINT NOT NULL,
    at              BIGINT NOT NULL,
    next_attempt_at BIGINT,
    PRIMARY KEY (delivery_id, attempt)
);
CREATE INDEX webhook_attempts_by_webhook ON webhook_attempts (webhook_id, at);
