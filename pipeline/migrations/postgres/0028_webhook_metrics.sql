-- Per-subscription delivery metrics for /metrics (contract part 2: Endpoint health):
-- attempts that succeeded and that failed, their total duration, and how many took at
-- most each bucket's bound. Kept with the subscription and added to by the transaction
-- that records each batch of attempts, so that a scrape reads a row per subscription
-- whichever process delivered.
ALTER TABLE webhooks ADD COLUMN attempts_succeeded BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_failed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_ms_sum BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_50ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_100ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_250ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_500ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_1s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_2500ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_5s BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempts_le_10s BIGINT NOT NULL DEFAULT 0;
