-- Storage hygiene: maintenance finds old objects by age, uploads are counted per developer.
CREATE INDEX blobs_created ON blobs (created_at);
CREATE INDEX uploads_owner ON uploads (owner_key_id, created_at);
CREATE INDEX uploads_created ON uploads (created_at);
