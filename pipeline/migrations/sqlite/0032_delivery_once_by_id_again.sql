-- The unique index on (subscription, event id) dropped again, the delivery id the only
-- key (as 0030 had it). 0031 brought it back because an event could reach the webhook
-- stage twice with two times: on Kafka, a claim decided again by a decide stage that
-- crashed before committing its offset. The store now holds a decision only when its
-- time matches the recorded one's too, so the second decision's events are never
-- published, and an event keeps its time, hence its delivery id. The index cost a
-- quarter of the pages each commit wrote to SQLite's write-ahead log at a steady rate.
DROP INDEX IF EXISTS webhook_deliveries_once;
