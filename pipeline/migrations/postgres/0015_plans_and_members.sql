-- Benefit plans and the members on them (contract part 2: Plans and members). A plan's
-- benefits and a member's coverage periods are kept as JSON: they are read whole, by
-- one key, when a claim of the member is adjudicated.

CREATE TABLE plans (
    tenant_id   TEXT NOT NULL REFERENCES tenants (tenant_id),
    plan_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    benefits    TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, plan_id)
);

CREATE TABLE members (
    tenant_id     TEXT NOT NULL REFERENCES tenants (tenant_id),
    member_id     TEXT NOT NULL,
    date_of_birth TEXT NOT NULL,
    sex           TEXT NOT NULL,
    plan_id       TEXT NOT NULL,
    coverage      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, member_id),
    FOREIGN KEY (tenant_id, plan_id) REFERENCES plans (tenant_id, plan_id)
);
