-- Each counted claim's place in its member's year (`seq`), kept with the store's copy of
-- the accumulators: the snapshot stage restores the years from this table, written in
-- the transaction that holds the decisions, rather than from `state.accumulators`,
-- whose records of one batch may land on some partitions only before a crash. A claim
-- redelivered after a restart is priced against the claims with a lower `seq`.
-- Rows counted before the column existed take 0: they come before every later claim.

ALTER TABLE member_accumulators ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
