-- Members' accumulators (contract part 2), the queryable copy of `state.accumulators`:
-- a row per claim counted in a member's calendar year, written with its decision and
-- deleted when the claim is voided or replaced. A member's year is the sum of its rows.
-- And a claim's pricing (the plan, fee schedule and cap the decide stage fixed), kept so
-- that an officer's approval is adjudicated against the member's year as it stands then.

ALTER TABLE claims ADD COLUMN pricing TEXT;

CREATE TABLE member_accumulators (
    tenant_id     TEXT NOT NULL,
    member_id     TEXT NOT NULL,
    year          INTEGER NOT NULL,
    claim_id      TEXT NOT NULL,
    deductible    BIGINT NOT NULL,
    out_of_pocket BIGINT NOT NULL,
    paid          BIGINT NOT NULL,
    visits        TEXT NOT NULL,
    PRIMARY KEY (tenant_id, member_id, year, claim_id)
);
