-- Active (pending or running) jobs, counted as they change instead of counted over the queue:
-- per key for the limit on POST /v1/jobs (api_keys.active_jobs), and in total for the
-- maintenance tick (counters 'active_jobs'; pending = active - running, and running is bounded
-- by the fleet). Triggers keep both in the transaction of every change of a job's state,
-- whichever statement makes it. A claim (pending -> running) changes neither.
ALTER TABLE api_keys ADD COLUMN active_jobs INTEGER NOT NULL DEFAULT 0;
UPDATE api_keys SET active_jobs = (SELECT count(*) FROM jobs WHERE jobs.owner_key_id = api_keys.id
  AND jobs.state IN ('pending', 'running'));

CREATE TABLE counters (
  name   TEXT PRIMARY KEY,
  value  INTEGER NOT NULL
);
INSERT INTO counters (name, value)
  SELECT 'active_jobs', count(*) FROM jobs WHERE state IN ('pending', 'running');

CREATE TRIGGER jobs_active_insert AFTER INSERT ON jobs
WHEN new.state IN ('pending', 'running')
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs + 1 WHERE id = new.owner_key_id;
  UPDATE counters SET value = value + 1 WHERE name = 'active_jobs';
END;

CREATE TRIGGER jobs_active_update AFTER UPDATE OF state ON jobs
WHEN (old.state IN ('pending', 'running')) <> (new.state IN ('pending', 'running'))
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs + (CASE WHEN new.state IN ('pending', 'running')
    THEN 1 ELSE -1 END) WHERE id = new.owner_key_id;
  UPDATE counters SET value = value + (CASE WHEN new.state IN ('pending', 'running')
    THEN 1 ELSE -1 END) WHERE name = 'active_jobs';
END;

CREATE TRIGGER jobs_active_delete AFTER DELETE ON jobs
WHEN old.state IN ('pending', 'running')
BEGIN
  UPDATE api_keys SET active_jobs = active_jobs - 1 WHERE id = old.owner_key_id;
  UPDATE counters SET value = value - 1 WHERE name = 'active_jobs';
END;
