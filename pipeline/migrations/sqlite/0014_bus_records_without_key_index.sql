-- The index by record key served only compaction, which now groups a topic's records
-- by key when it runs. Kept, it cost every publish a write to a page chosen by the
-- key's hash: with state topics keyed by member, about one index page per record.
DROP INDEX bus_records_by_key;
