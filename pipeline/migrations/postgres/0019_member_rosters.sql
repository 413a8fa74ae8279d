-- A version per tenant's roster, moved by every change to its members in the
-- transaction that makes it: a stage keeps the members it has read while the version
-- stands, and asks the store for one number per batch instead of every member again.

CREATE TABLE member_rosters (
    tenant_id TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
