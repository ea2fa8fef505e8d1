-- The maintenance tick looks for nodes to quarantine among those with bans inside the window
-- (bans by time), not among all nodes.
CREATE INDEX job_bans_at ON job_bans (at);
