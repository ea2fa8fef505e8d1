-- A node proves it is the agent that first registered its machine_id with a per-node secret
-- (returned once at first registration, kept in the agent's identity file); only its SHA-256 is
-- stored. NULL: registered before node secrets existed (adopted by the next registration that
-- finds the node without a live lease).
ALTER TABLE nodes ADD COLUMN secret_hash TEXT;
