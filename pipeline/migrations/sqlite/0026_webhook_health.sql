-- Endpoint health (contract part 2: Replay and delivery control): a subscription whose
-- deliveries have all failed for 24 hours, at least 20 of them, is disabled with its
-- reason; enabling it again clears both and starts its streak anew (`enabled_at`).
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;
ALTER TABLE webhooks ADD COLUMN disabled_at BIGINT;
ALTER TABLE webhooks ADD COLUMN enabled_at BIGINT;
