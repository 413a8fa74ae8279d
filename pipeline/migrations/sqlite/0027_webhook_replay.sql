-- Webhook replay (POST /webhooks/{webhook_id}/replay): a replay's deliveries form a
-- lane of their own, numbered in the order their events happened. Only the next one is
-- `pending`; the others are `held` until the one before ends (delivered or failed), so
-- the receiver gets them in order, one at a time.
ALTER TABLE webhook_deliveries ADD COLUMN replay_job TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN replay_seq BIGINT;
CREATE INDEX webhook_deliveries_by_replay ON webhook_deliveries (replay_job, replay_seq);
