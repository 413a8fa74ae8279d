-- Records waiting to be produced to Kafka. Intake, uploads and officers' decisions
-- write their bus records here in the same transaction as their own rows, so a 202 is
-- durable before the broker has it; the relay produces them in id order and deletes
-- them once the broker acknowledged them. Unused on the embedded log.
CREATE TABLE bus_outbox (
    id BIGSERIAL PRIMARY KEY,
    topic TEXT NOT NULL,
    partition BIGINT NOT NULL,
    record_key TEXT NOT NULL,
    value BYTEA NOT NULL,
    timestamp_ms BIGINT NOT NULL
);
