-- Providers, their contracts, and rulebooks. Dates are YYYY-MM-DD text, which orders
-- as the calendar does; times are Unix milliseconds.

CREATE TABLE providers (
    tenant_id   TEXT NOT NULL REFERENCES tenants (tenant_id),
    provider_id TEXT NOT NULL,
    name        TEXT NOT NULL,
    npi         TEXT,
    specialty   TEXT,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, provider_id)
);

CREATE TABLE contracts (
    contract_id    TEXT PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    provider_id    TEXT NOT NULL,
    status         TEXT NOT NULL,
    effective_from TEXT NOT NULL,
    effective_to   TEXT,
    fee_schedule   TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    FOREIGN KEY (tenant_id, provider_id) REFERENCES providers (tenant_id, provider_id)
);
CREATE INDEX contracts_by_provider ON contracts (tenant_id, provider_id, created_at);

CREATE TABLE rulebooks (
    rulebook_id  TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants (tenant_id),
    version      BIGINT NOT NULL,
    name         TEXT NOT NULL,
    rules        TEXT NOT NULL,
    status       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    published_at BIGINT,
    UNIQUE (tenant_id, version)
);
-- At most one active rulebook per tenant, whatever races the writers run.
CREATE UNIQUE INDEX one_active_rulebook ON rulebooks (tenant_id) WHERE status = 'active';
