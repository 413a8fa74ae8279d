-- Webhook replay (POST /webhooks/{webhook_id}/replay): a replay's deliveries form a
-- lane of their own, numbered in the order their events happened. Only the next one is
-- `pending`; the others are `held` until the one before ends (delivered or failed), so
-- the receiver gets them in order, one at a time. An event is queued once per
-- subscription as before, and once more per replay: the uniqueness of (subscription,
-- event) now holds for the deliveries that are not replays.
ALTER TABLE webhook_deliveries ADD COLUMN replay_job TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN replay_seq BIGINT;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_webhook_id_event_id_key;
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (webhook_id, event_id)
    WHERE replay_job IS NULL;
CREATE INDEX webhook_deliveries_by_replay ON webhook_deliveries (replay_job, replay_seq);
