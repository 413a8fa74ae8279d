-- The sender claims per subscription, oldest due first: an index seek per subscription
-- instead of a scan of every pending delivery, which a dead endpoint's backlog made long.
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, state, next_attempt_at);
