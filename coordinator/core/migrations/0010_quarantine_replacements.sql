-- Which key registered a node, and whether an operator's quarantine of it extends to the nodes
-- that key registers afterwards: a quarantined machine that comes back under a new machine_id
-- with the same enroll key (an owner's own key) starts quarantined.
ALTER TABLE nodes ADD COLUMN enroll_key_id TEXT;
ALTER TABLE nodes ADD COLUMN quarantine_extends INTEGER NOT NULL DEFAULT 0;
CREATE INDEX nodes_quarantine_extends ON nodes (enroll_key_id) WHERE quarantine_extends = 1;
