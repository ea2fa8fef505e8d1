-- Gleaner schema v1. Runs unchanged on SQLite and D1. Times are Unix milliseconds (INTEGER).

CREATE TABLE api_keys (
  id          TEXT PRIMARY KEY,
  token_hash  TEXT NOT NULL UNIQUE,          -- lowercase hex SHA-256 of the bearer token
  role        TEXT NOT NULL CHECK (role IN ('developer', 'enroll', 'operator')),
  name        TEXT NOT NULL,
  created_at  INTEGER NOT NULL,
  revoked_at  INTEGER
);

CREATE TABLE nodes (
  id                TEXT PRIMARY KEY,
  machine_id        TEXT NOT NULL UNIQUE,
  token_hash        TEXT NOT NULL UNIQUE,
  gpu_name          TEXT NOT NULL,
  vram_mb           INTEGER NOT NULL,
  agent_version     TEXT NOT NULL,
  state             TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'quarantined')),
  state_reason      TEXT,
  state_changed_at  INTEGER,                   -- last quarantine/restore; failures before a
                                               -- restore do not count towards quarantine
  jobs_completed    INTEGER NOT NULL DEFAULT 0,
  jobs_failed       INTEGER NOT NULL DEFAULT 0,
  registered_at     INTEGER NOT NULL,
  last_seen_at      INTEGER NOT NULL
);

CREATE TABLE jobs (
  id                TEXT PRIMARY KEY,
  owner_key_id      TEXT NOT NULL,
  idempotency_key   TEXT,
  kind              TEXT NOT NULL,
  spec              TEXT NOT NULL,             -- validated, normalised JSON of the submission
  state             TEXT NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed', 'canceled')),
  priority          INTEGER NOT NULL DEFAULT 0,
  max_failures      INTEGER NOT NULL,
  min_vram_mb       INTEGER NOT NULL DEFAULT 0,
  steps_total       INTEGER NOT NULL,
  step_done         INTEGER NOT NULL DEFAULT 0,  -- highest step reported by the current lease
  lease_epoch       INTEGER NOT NULL DEFAULT 0,
  lease_nonce       TEXT,                       -- set by the claim that opened the lease
  node_id           TEXT,
  lease_expires_at  INTEGER,
  attempts          INTEGER NOT NULL DEFAULT 0,  -- leases handed out
  failures          INTEGER NOT NULL DEFAULT 0,
  ckpt_step         INTEGER,                    -- latest committed checkpoint
  ckpt_key          TEXT,
  ckpt_sha256       TEXT,
  ckpt_size         INTEGER,
  ckpt_committed_at INTEGER,
  outputs           TEXT,                       -- JSON array [{name, key, sha256, size}]
  reason            TEXT,                       -- failure / cancel reason
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  first_started_at  INTEGER,
  finished_at       INTEGER
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (owner_key_id, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_queue ON jobs (state, priority DESC, created_at, id);
CREATE INDEX jobs_leases ON jobs (state, lease_expires_at);
CREATE INDEX jobs_owner ON jobs (owner_key_id, created_at, id);
CREATE INDEX jobs_owner_state ON jobs (owner_key_id, state, created_at, id);
CREATE INDEX jobs_created ON jobs (created_at, id);
CREATE INDEX jobs_state_created ON jobs (state, created_at, id);
CREATE INDEX jobs_nonce ON jobs (lease_nonce);

-- A node that failed a job never gets it again.
CREATE TABLE job_bans (
  job_id   TEXT NOT NULL,
  node_id  TEXT NOT NULL,
  reason   TEXT NOT NULL,
  at       INTEGER NOT NULL,
  PRIMARY KEY (job_id, node_id)
);
CREATE INDEX job_bans_node ON job_bans (node_id, at);

-- One row per lease: the billing and timeline record.
CREATE TABLE segments (
  job_id                TEXT NOT NULL,
  epoch                 INTEGER NOT NULL,
  node_id               TEXT NOT NULL,
  gpu_name              TEXT NOT NULL,
  usd_per_hour          REAL NOT NULL,         -- price snapshot at claim time
  heartbeat_interval_s  REAL NOT NULL,
  started_at            INTEGER NOT NULL,
  first_heartbeat_at    INTEGER,
  last_heartbeat_at     INTEGER,
  heartbeats            INTEGER NOT NULL DEFAULT 0,
  step_start            INTEGER NOT NULL,      -- committed checkpoint step the lease resumed from
  step_end              INTEGER NOT NULL,      -- highest step reported
  step_committed        INTEGER NOT NULL,      -- highest checkpoint step committed in this lease
  ended_at              INTEGER,
  end_reason            TEXT,                  -- completed | failed | released | stalled | canceled
  note                  TEXT,                  -- failure / release reason reported by the agent
  last_loss             REAL,                  -- loss of the last heartbeat that carried one
  PRIMARY KEY (job_id, epoch)
);
CREATE INDEX segments_node ON segments (node_id, started_at);
CREATE INDEX segments_started ON segments (started_at);

CREATE TABLE checkpoints (
  job_id        TEXT NOT NULL,
  step          INTEGER NOT NULL,
  epoch         INTEGER NOT NULL,
  key           TEXT NOT NULL,
  sha256        TEXT NOT NULL,
  size          INTEGER NOT NULL,
  committed_at  INTEGER NOT NULL,
  PRIMARY KEY (job_id, step)
);

-- Objects the built-in store (or R2 through the edge shell) has durably stored.
CREATE TABLE blobs (
  key         TEXT PRIMARY KEY,
  size        INTEGER NOT NULL,
  sha256      TEXT NOT NULL,
  created_at  INTEGER NOT NULL
);

-- Developer uploads announced by POST /v1/uploads.
CREATE TABLE uploads (
  id            TEXT PRIMARY KEY,
  owner_key_id  TEXT NOT NULL,
  name          TEXT NOT NULL,
  key           TEXT NOT NULL UNIQUE,
  size          INTEGER NOT NULL,
  sha256        TEXT NOT NULL,
  created_at    INTEGER NOT NULL
);

CREATE TABLE prices (
  gpu           TEXT PRIMARY KEY,              -- '*' is the default
  usd_per_hour  REAL NOT NULL,
  updated_at    INTEGER NOT NULL
);
INSERT INTO prices (gpu, usd_per_hour, updated_at) VALUES ('*', 0.324, 0);

CREATE TABLE scaling_events (
  id        INTEGER PRIMARY KEY AUTOINCREMENT,
  at        INTEGER NOT NULL,
  running   INTEGER NOT NULL,
  pending   INTEGER NOT NULL,
  current   INTEGER,                           -- nodes the provider reports, when known
  target    INTEGER NOT NULL,
  min_nodes INTEGER NOT NULL,
  max_nodes INTEGER NOT NULL,
  provider  TEXT,
  note      TEXT
);

CREATE TABLE agent_releases (
  version    TEXT NOT NULL,
  channel    TEXT NOT NULL DEFAULT 'stable',
  manifest   TEXT NOT NULL,                    -- signed manifest JSON as published
  created_at INTEGER NOT NULL,
  PRIMARY KEY (version, channel)
);

-- Idempotent request replay (Idempotency-Key on POST /v1/jobs is handled by jobs_idempotency).
