-- Supporting documents. The file itself is in the object store under object_key;
-- ocr holds the extraction as JSON (pages, text, excerpt, amounts and dates found).
CREATE TABLE uploads (
    tenant_id TEXT NOT NULL,
    upload_id TEXT NOT NULL,
    claim_id TEXT NOT NULL,
    status TEXT NOT NULL,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    object_key TEXT,
    scan_verdict TEXT NOT NULL,
    scan_signature TEXT,
    ocr TEXT,
    failure_code TEXT,
    failure_message TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, upload_id)
);
CREATE INDEX uploads_by_claim ON uploads (tenant_id, claim_id, created_at);
