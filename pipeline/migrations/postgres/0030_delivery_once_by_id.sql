-- A subscription's delivery of an event is queued once: its id is a function of the
-- two (`stages::webhooks::delivery_id`), so the primary key already refuses a second
-- one, and the unique index on (webhook_id, event_id) said it again. Its entries land
-- at random places (event ids are hashes), so each commit at a steady rate rewrote
-- pages of it all over the file: about a quarter of what a commit wrote to SQLite's
-- write-ahead log. Replays keep their own lanes and ids, as before.
DROP INDEX IF EXISTS webhook_deliveries_once;
