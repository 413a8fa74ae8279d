-- The embedded log: topics of keyed records in partitions, consumer-group offsets and
-- the lease that lets one process at a time consume a group's topic.

CREATE TABLE bus_partitions (
    topic       TEXT NOT NULL,
    partition   BIGINT NOT NULL,
    next_offset BIGINT NOT NULL,
    PRIMARY KEY (topic, partition)
);

CREATE TABLE bus_records (
    topic        TEXT NOT NULL,
    partition    BIGINT NOT NULL,
    "offset"     BIGINT NOT NULL,
    record_key   TEXT NOT NULL,
    value        BLOB NOT NULL,
    timestamp_ms BIGINT NOT NULL,
    PRIMARY KEY (topic, partition, "offset")
);
CREATE INDEX bus_records_by_key ON bus_records (topic, partition, record_key, "offset");

CREATE TABLE bus_offsets (
    group_id    TEXT NOT NULL,
    topic       TEXT NOT NULL,
    partition   BIGINT NOT NULL,
    next_offset BIGINT NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);

CREATE TABLE bus_leases (
    group_id    TEXT NOT NULL,
    topic       TEXT NOT NULL,
    owner       TEXT NOT NULL,
    expires_at  BIGINT NOT NULL,
    PRIMARY KEY (group_id, topic)
);
