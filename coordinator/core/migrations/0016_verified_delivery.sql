-- Verified training that delivers no forged result (docs/architecture.md "Verified training").

-- A job whose last segment is being replayed is 'verifying' between its completion by the
-- trainer and the replay's verdict: its output is not released until the replay agrees.
-- SQLite cannot change a CHECK constraint, so the table is rebuilt with the same columns,
-- indexes and triggers (DROP TABLE drops its triggers without firing them; the copy fires none).
CREATE TABLE jobs_0016 (
  id                TEXT PRIMARY KEY,
  owner_key_id      TEXT NOT NULL,
  idempotency_key   TEXT,
  kind              TEXT NOT NULL,
  spec              TEXT NOT NULL,
  state             TEXT NOT NULL CHECK (state IN ('pending', 'running', 'verifying',
                                                   'completed', 'failed', 'canceled')),
  priority          INTEGER NOT NULL DEFAULT 0,
  max_failures      INTEGER NOT NULL,
  min_vram_mb       INTEGER NOT NULL DEFAULT 0,
  steps_total       INTEGER NOT NULL,
  step_done         INTEGER NOT NULL DEFAULT 0,
  lease_epoch       INTEGER NOT NULL DEFAULT 0,
  lease_nonce       TEXT,
  node_id           TEXT,
  lease_expires_at  INTEGER,
  attempts          INTEGER NOT NULL DEFAULT 0,
  failures          INTEGER NOT NULL DEFAULT 0,
  ckpt_step         INTEGER,
  ckpt_key          TEXT,
  ckpt_sha256       TEXT,
  ckpt_size         INTEGER,
  ckpt_committed_at INTEGER,
  outputs           TEXT,
  reason            TEXT,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  first_started_at  INTEGER,
  finished_at       INTEGER,
  verify_fraction   REAL NOT NULL DEFAULT 0,
  progress_at       INTEGER
);
INSERT INTO jobs_0016 (id, owner_key_id, idempotency_key, kind, spec, state, priority,
  max_failures, min_vram_mb, steps_total, step_done, lease_epoch, lease_nonce, node_id,
  lease_expires_at, attempts, failures, ckpt_step, ckpt_key, ckpt_sha256, ckpt_size,
  ckpt_committed_at, outputs, reason, created_at, updated_at, first_started_at, finished_at,
  verify_fraction, progress_at)
  SELECT id, owner_key_id, idempotency_key, kind, spec, state, priority, max_failures,
  min_vram_mb, steps_total, step_done, lease_epoch, lease_nonce, node_id, lease_expires_at,
  attempts, failures, ckpt_step, ckpt_key, ckpt_sha256, ckpt_size, ckpt_committed_at, outputs,
  reason, created_at, updated_at, first_started_at, finished_at, verify_fraction, progress_at
  FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_0016 RENAME TO jobs;
CREATE UNIQUE INDEX jobs_idempotency ON jobs (owner_key_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_queue ON jobs (state, priority DESC, created_at, id);
CREATE INDEX jobs_leases ON jobs (state, lease_expires_at);
CREATE INDEX jobs_owner ON jobs (owner_key_id, created_at, id);
CREATE INDEX jobs_owner_state ON jobs (owner_key_id, state, created_at, id);
CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_state_created ON jobs (state, created_at, id);
CREATE INDEX jobs_nonce ON jobs (lease_nonce);
CREATE INDEX jobs_running_node ON jobs (node_id) WHERE state = 'running';

CREATE TRIGGER jobs_active_insert AFTER INSERT ON jobs
WHEN new.state IN ('pending', 'running')
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs + 1 WHERE id = new.owner_key_id;
  UPDATE counters SET value = value + 1 WHERE name = 'active_jobs';
END;

CREATE TRIGGER jobs_active_update AFTER UPDATE OF state ON jobs
WHEN (old.state IN ('pending', 'running')) <> (new.state IN ('pending', 'running'))
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs + (CASE WHEN new.state IN ('pending', 'running')
    THEN 1 ELSE -1 END) WHERE id = new.owner_key_id;
  UPDATE counters SET value = value + (CASE WHEN new.state IN ('pending', 'running')
    THEN 1 ELSE -1 END) WHERE name = 'active_jobs';
END;

CREATE TRIGGER jobs_active_delete AFTER DELETE ON jobs
WHEN old.state IN ('pending', 'running')
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs - 1 WHERE id = old.owner_key_id;
  UPDATE counters SET value = value - 1 WHERE name = 'active_jobs';
END;

-- Work a rewind discarded because a node in its lineage was found forging: verification
-- rework, billed apart from the job's training.
ALTER TABLE segments ADD COLUMN rework INTEGER NOT NULL DEFAULT 0;

-- A completed (or verifying) job sent back to the queue because a node in its lineage was
-- found forging: when, which node, the step it went back to, and the outputs it had released
-- (canonical JSON of the job's outputs then; NULL if none had been released).
CREATE TABLE job_reopens (
  job_id   TEXT NOT NULL,
  at       INTEGER NOT NULL,
  node_id  TEXT NOT NULL,
  step     INTEGER NOT NULL,
  outputs  TEXT,
  PRIMARY KEY (job_id, at, node_id)
);

-- Reproducibility classes (what a node reports it trains with: GPU model, compute capability,
-- SM count, driver, CUDA/cuDNN, libtorch, trainer build; CPU nodes their CPU family, libtorch
-- build and thread count), as canonical text. A replay goes only to a node of the trainer's
-- class; the verification records it.
ALTER TABLE nodes ADD COLUMN repro_class TEXT;
ALTER TABLE segments ADD COLUMN repro_class TEXT;
ALTER TABLE verifications ADD COLUMN trainer_class TEXT;
ALTER TABLE verifications ADD COLUMN verifier_class TEXT;

-- Scratch rows of one taint rewind (core/taint.h): the jobs a quarantined forger's work reached
-- and the step each goes back to, written and deleted by the same batch (keyed by its nonce),
-- so every statement of the batch acts on the same set.
CREATE TABLE taint_rewinds (
  nonce    TEXT NOT NULL,
  job_id   TEXT NOT NULL,
  node_id  TEXT NOT NULL,
  step     INTEGER NOT NULL,
  PRIMARY KEY (nonce, job_id)
);

-- Maintenance asks whether any active node of a replay's device and class exists.
CREATE INDEX nodes_device ON nodes (state, gpu_name, repro_class);
