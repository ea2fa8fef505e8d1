-- Verified training (docs/architecture.md "Verified training"): committed checkpoints are
-- sampled at random and a second node replays the segment that produced them.

-- The share of a job's checkpoint commits that are replayed, fixed at submission (the job's
-- verify_fraction or the operator's default).
ALTER TABLE jobs ADD COLUMN verify_fraction REAL NOT NULL DEFAULT 0;

-- One row per replay of one segment (checkpoint step_from -> checkpoint step). It is leased to
-- one node at a time like a job (lease_epoch, lease_nonce, node_id, lease_expires_at), never to
-- the node that trained the segment (trainer_node) nor, in round 2, to the first verifier
-- (other_node).
CREATE TABLE verifications (
  id                TEXT PRIMARY KEY,
  job_id            TEXT NOT NULL,
  round             INTEGER NOT NULL,            -- 1: second opinion, 2: third node
  step_from         INTEGER NOT NULL,            -- checkpoint replayed from (0: from scratch)
  from_key          TEXT,                        -- its object (NULL when step_from = 0)
  from_sha256       TEXT,
  from_size         INTEGER,
  step              INTEGER NOT NULL,            -- the checkpoint under check
  claimed_sha256    TEXT NOT NULL,               -- what its trainer committed
  trainer_node      TEXT NOT NULL,
  other_node        TEXT,                        -- round 2: the first verifier
  other_sha256      TEXT,                        -- round 2: the first verifier's result
  state             TEXT NOT NULL CHECK (state IN ('pending', 'running', 'done', 'void')),
  verdict           TEXT,                        -- agree | disagree | trainer_bad |
                                                 -- verifier_bad | no_majority
  lease_epoch       INTEGER NOT NULL DEFAULT 0,
  lease_nonce       TEXT,
  node_id           TEXT,
  lease_expires_at  INTEGER,
  result_sha256     TEXT,
  gpu_name          TEXT,
  usd_per_hour      REAL,                        -- price snapshot at claim time
  billed_ms         INTEGER NOT NULL DEFAULT 0,  -- lease time of the attempt that delivered
  created_at        INTEGER NOT NULL,
  started_at        INTEGER,
  ended_at          INTEGER
);
CREATE INDEX verifications_queue ON verifications (state, created_at, id);
CREATE INDEX verifications_job ON verifications (job_id, step);
CREATE INDEX verifications_nonce ON verifications (lease_nonce);
