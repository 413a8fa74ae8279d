-- What a subscription's deliveries carry of each event's data: full or thin.
ALTER TABLE webhooks ADD COLUMN payload TEXT NOT NULL DEFAULT 'full';
