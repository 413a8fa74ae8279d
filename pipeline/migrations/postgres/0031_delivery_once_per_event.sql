-- The unique index on (subscription, event id) again (0030 dropped it, taking the
-- delivery id as the only key). On Kafka an event can reach the webhook stage twice
-- with two times: the decide stage that crashed before committing its offset decides
-- the claim again, and the snapshot stage holds and publishes the second decision too
-- (its details are the first one's), so its events keep their ids but not their
-- times, and the delivery id, which takes the event's time, differs. This index is
-- what keeps such an event delivered once.
CREATE UNIQUE INDEX IF NOT EXISTS webhook_deliveries_once ON webhook_deliveries (webhook_id, event_id)
    WHERE replay_job IS NULL;
