-- One lease per node, a progress watchdog and a cap on the nodes of an enroll key
-- (docs/architecture.md "Leases", docs/operations.md "Fleet limits").

-- When the current lease's reported step last advanced (the claim sets it to the lease's start;
-- a heartbeat or checkpoint commit with a higher step moves it). A lease whose step has not
-- advanced within progress-timeout is ended at its next heartbeat and not billed beyond it.
ALTER TABLE jobs ADD COLUMN progress_at INTEGER;
UPDATE jobs SET progress_at = updated_at WHERE state = 'running';

-- The claim refuses a node that holds a live lease of either kind: found through these.
CREATE INDEX jobs_running_node ON jobs (node_id) WHERE state = 'running';
CREATE INDEX verifications_running_node ON verifications (node_id) WHERE state = 'running';

-- The most nodes an enroll key may have registered and not revoked; NULL: the operator's
-- enroll-max-nodes setting; 0: no limit. Counted by registration through nodes_enroll_key.
ALTER TABLE api_keys ADD COLUMN max_nodes INTEGER;
CREATE INDEX nodes_enroll_key ON nodes (enroll_key_id) WHERE revoked_at IS NULL;
