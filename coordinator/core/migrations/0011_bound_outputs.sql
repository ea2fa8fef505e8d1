-- The job's output is bound to its final checkpoint (docs/architecture.md "Verified training"):
-- the checkpoint of the last step is committed with the files it exports to, the job completes
-- only with those, and a replay of the last segment exports its own and compares them.
-- Each is the canonical JSON text of the files (coordinator/core/outputs.h), NULL elsewhere.
ALTER TABLE checkpoints ADD COLUMN outputs TEXT;
ALTER TABLE verifications ADD COLUMN claimed_outputs TEXT;  -- what the trainer committed
ALTER TABLE verifications ADD COLUMN other_outputs TEXT;    -- round 2: the first verifier's
ALTER TABLE verifications ADD COLUMN result_outputs TEXT;   -- this replay's
