-- Indexes for the maintenance tick and the autoscaler: open segments (stall reaping scans
-- ended_at IS NULL) and recently ended ones (the warm buffer), quarantined nodes by time.
CREATE INDEX segments_ended ON segments (ended_at, end_reason);
CREATE INDEX nodes_state ON nodes (state, state_changed_at);
