-- How a record's value is stored: 0 as it was published, 1 compressed as an LZ4 block
-- with its length in front (`bus::codec`). Records written before keep 0.
ALTER TABLE bus_records ADD COLUMN codec BIGINT NOT NULL DEFAULT 0;
