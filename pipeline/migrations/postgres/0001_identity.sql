-- Tenants, users, sessions with their refresh-token families, and signing keys.
-- Times are Unix milliseconds.

CREATE TABLE tenants (
    tenant_id   TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    settings    TEXT NOT NULL DEFAULT '{}',
    created_at  BIGINT NOT NULL
);

CREATE TABLE users (
    user_id       TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants (tenant_id),
    -- stored lower-cased; unique across tenants so that login needs only the email
    email         TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    scopes        TEXT NOT NULL,
    disabled      BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX users_by_tenant ON users (tenant_id);

CREATE TABLE sessions (
    session_id    TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants (tenant_id),
    user_id       TEXT NOT NULL REFERENCES users (user_id),
    created_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    revoked_at    BIGINT,
    revoke_reason TEXT
);
CREATE INDEX sessions_by_user ON sessions (user_id);

-- Only the SHA-256 of a refresh token is kept. A session's tokens form one family:
-- presenting a token whose rotated_at is set means it was stolen or replayed.
CREATE TABLE refresh_tokens (
    token_hash  TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (session_id),
    issued_at   BIGINT NOT NULL,
    rotated_at  BIGINT
);
CREATE INDEX refresh_tokens_by_session ON refresh_tokens (session_id);

-- Public halves of the keys that sign access tokens; the JWKS serves the ones not
-- retired, so that every process's key verifies everywhere.
CREATE TABLE signing_keys (
    kid         TEXT PRIMARY KEY,
    algorithm   TEXT NOT NULL,
    public_jwk  TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    retired_at  BIGINT
);
