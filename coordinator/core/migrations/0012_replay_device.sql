-- A replay is compared only with one from the same device (docs/architecture.md "Verified
-- training"): the GPU model (or "cpu") of the node that trained the segment, as it registered,
-- recorded when the verification is opened; only a node that reports the same one may take it.
-- NULL on verifications opened before this column: any node.
ALTER TABLE verifications ADD COLUMN trainer_gpu TEXT;
