-- Endpoint health (contract part 2: Replay and delivery control): each subscription's
-- current streak of failed attempts (how many, since when), kept with the attempts'
-- record, so that a look at it costs one row however long the streak; a subscription
-- whose attempts have all failed for 24 hours, at least 20 of them, is disabled with
-- its reason, and enabling it again clears the reason and the streak.
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;
ALTER TABLE webhooks ADD COLUMN disabled_at BIGINT;
ALTER TABLE webhooks ADD COLUMN streak_failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN streak_since BIGINT;
