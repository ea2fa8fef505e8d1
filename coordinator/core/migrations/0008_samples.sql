-- Sample images rendered during training (docs/api.md "Samples"): artifacts of a job, stored
-- like checkpoints and outputs (blobs) and committed one step at a time.

-- One row per committed step: the first commit of a step wins (samples are deterministic, a
-- resumed trainer renders the step it resumed from again).
CREATE TABLE sample_steps (
  job_id        TEXT NOT NULL,
  step          INTEGER NOT NULL,
  epoch         INTEGER NOT NULL,
  seed          INTEGER NOT NULL,
  seconds       REAL NOT NULL,              -- wall time the trainer spent rendering them
  images        INTEGER NOT NULL,
  committed_at  INTEGER NOT NULL,
  PRIMARY KEY (job_id, step)
);

-- One row per image: samples/<step>/<idx>.png of the job.
CREATE TABLE samples (
  job_id           TEXT NOT NULL,
  step             INTEGER NOT NULL,
  idx              INTEGER NOT NULL,
  key              TEXT NOT NULL,
  sha256           TEXT NOT NULL,
  size             INTEGER NOT NULL,
  prompt           TEXT NOT NULL,
  negative_prompt  TEXT NOT NULL,
  PRIMARY KEY (job_id, step, idx)
);

-- Sampling time of each lease, shown apart in the cost report.
ALTER TABLE segments ADD COLUMN sampling_s REAL NOT NULL DEFAULT 0;
