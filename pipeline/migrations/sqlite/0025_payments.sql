-- Payment runs (POST /payments/runs): one payment per provider per run, and each claim
-- paid at most once, ever: its row here is keyed by the claim alone, so a second run,
-- or a run redone after a crash, cannot pay it again.
CREATE TABLE payment_runs (
    tenant_id   TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    through     TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, run_id)
);

CREATE TABLE payments (
    tenant_id     TEXT NOT NULL,
    payment_id    TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    provider_id   TEXT NOT NULL,
    amount        BIGINT NOT NULL,
    trace_number  TEXT NOT NULL,
    issued_at     BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, payment_id)
);

CREATE TABLE payment_claims (
    tenant_id   TEXT NOT NULL,
    claim_id    TEXT NOT NULL,
    payment_id  TEXT NOT NULL,
    amount      BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, claim_id)
);
CREATE INDEX payment_claims_by_payment ON payment_claims (tenant_id, payment_id, claim_id);
