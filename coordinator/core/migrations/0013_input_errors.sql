-- Failures are attributed (docs/operations.md "Failure attribution"): a lease that ends with
-- cause "input" (the trainer refused the job's dataset, model or params) reports an input error
-- instead of a failure. The first one is not counted against the node: the job goes back to
-- pending and waits for a node of another machine to confirm it. One row per report.
--   outcome NULL             the first report, awaiting confirmation (at most one per job);
--           'confirmed'      confirmed: the report and its confirmation; the job failed;
--           'not_reproduced' a later lease trained past `step` (or completed): the reporter is
--                            quarantined as a forger.
CREATE TABLE input_errors (
  job_id      TEXT NOT NULL,
  epoch       INTEGER NOT NULL,          -- the lease that reported it
  node_id     TEXT NOT NULL,
  machine_id  TEXT NOT NULL,             -- the reporter's machine: the confirmer is another one
  step        INTEGER NOT NULL,          -- the step the reporting lease had reached
  reason      TEXT NOT NULL,             -- the trainer's message
  at          INTEGER NOT NULL,
  outcome     TEXT CHECK (outcome IN ('confirmed', 'not_reproduced')),
  outcome_at  INTEGER,
  PRIMARY KEY (job_id, epoch)
);
CREATE INDEX input_errors_open ON input_errors (job_id) WHERE outcome IS NULL;
