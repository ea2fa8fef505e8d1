-- An operator's revocation of a node: its token and node secret are replaced by unusable
-- values, so neither authenticates nor registers the machine_id again.
ALTER TABLE nodes ADD COLUMN revoked_at INTEGER;
