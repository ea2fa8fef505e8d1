-- Storage quotas per lease (docs/architecture.md "Storage quotas"): every upload URL the
-- coordinator mints for a lease (checkpoint, output, sample image) is recorded with the size it
-- allows, so that a lease's allowance can be checked in SQL and objects no commit names can be
-- collected in both storage modes (with S3 the coordinator never sees the upload itself).

CREATE TABLE lease_objects (
  key        TEXT PRIMARY KEY,
  job_id     TEXT NOT NULL,
  epoch      INTEGER NOT NULL,            -- the lease that asked for the URL
  kind       TEXT NOT NULL CHECK (kind IN ('ckpt', 'out', 'sample')),
  name       TEXT,                        -- an output's file name (NULL for the others)
  max_size   INTEGER NOT NULL,            -- what the URL allows: the reservation until stored
  minted_at  INTEGER NOT NULL             -- last URL minted for the key
);
CREATE INDEX lease_objects_lease ON lease_objects (job_id, epoch, kind);
CREATE INDEX lease_objects_minted ON lease_objects (minted_at);
