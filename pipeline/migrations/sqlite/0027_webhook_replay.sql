-- Webhook replay (POST /webhooks/{webhook_id}/replay): a replay's deliveries form a
-- lane of their own, numbered in the order their events happened. Only the next one is
-- `pending`; the others are `held` until the one before ends (delivered or failed), so
-- the receiver gets them in order, one at a time. An event is queued once per
-- subscription as before, and once more per replay: the uniqueness of (subscription,
-- event) now holds for the deliveries that are not replays. SQLite cannot drop a table
-- constraint, so the table is rebuilt without it.
CREATE TABLE webhook_deliveries_next (
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
    replay_job      TEXT,
    replay_seq      BIGINT
);
INSERT INTO webhook_deliveries_next (delivery_id, tenant_id, webhook_id, event_id, event,
    payload, state, attempts, failures, next_attempt_at, created_at)
SELECT delivery_id, tenant_id, webhook_id, event_id, event, payload, state, attempts,
    failures, next_attempt_at, created_at FROM webhook_deliveries;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_next RENAME TO webhook_deliveries;
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (webhook_id, event_id)
    WHERE replay_job IS NULL;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, next_attempt_at);
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, state, next_attempt_at);
CREATE INDEX webhook_deliveries_by_replay ON webhook_deliveries (replay_job, replay_seq);
