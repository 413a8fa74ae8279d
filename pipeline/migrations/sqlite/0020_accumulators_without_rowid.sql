-- The accumulators' rows kept in their primary key's order alone (WITHOUT ROWID): a
-- row is written with nearly every decision, and a rowid table keeps the key a second
-- time in an index of its own, so each write went into two b-trees instead of one.

CREATE TABLE member_accumulators_by_key (
    tenant_id     TEXT NOT NULL,
    member_id     TEXT NOT NULL,
    year          INTEGER NOT NULL,
    claim_id      TEXT NOT NULL,
    deductible    BIGINT NOT NULL,
    out_of_pocket BIGINT NOT NULL,
    paid          BIGINT NOT NULL,
    visits        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, member_id, year, claim_id)
) WITHOUT ROWID;

INSERT INTO member_accumulators_by_key SELECT
    tenant_id, member_id, year, claim_id, deductible, out_of_pocket, paid, visits
FROM member_accumulators;

DROP TABLE member_accumulators;

ALTER TABLE member_accumulators_by_key RENAME TO member_accumulators;
