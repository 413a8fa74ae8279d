-- X12 intake (POST /claims/x12): each interchange taken keeps the 999 and the 277CA
-- that answer it, for GET /x12/batches/{batch_id}/999 and /277ca.
CREATE TABLE x12_batches (
    tenant_id   TEXT NOT NULL,
    batch_id    TEXT NOT NULL,
    version     TEXT NOT NULL,
    accepted    BIGINT NOT NULL,
    rejected    BIGINT NOT NULL,
    ack_999     TEXT NOT NULL,
    ack_277ca   TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, batch_id)
);

-- The 837 names its billing provider by NPI.
CREATE INDEX providers_by_npi ON providers (tenant_id, npi);
