-- Indexes the worker needs on the pgmq queue `jobs` (docs/OPERATIONS.md, "From the embedded defaults to production").
-- Idempotent: apply once per database, and again after every update of this file; applying it twice changes nothing.
--   as part of deploy/database.sql, as the tables' owner (the worker's role cannot create an index)
-- The embedded PostgreSQL of dev and tests runs this file when it provisions the queue
-- (momentlens/devservices/postgres.py).

-- Waiting messages (never read: read_ct = 0), by content. A fan-out (jobqueue.enqueue.enqueue_unless_waiting,
-- e.g. reprocess_event) asks, per photo, "is a reprocess for it already waiting?" with
-- `message @> {"job": ..., "photo_id": ...}`: one index probe per id, whatever the length of the queue; the
-- archive is never read. Partial: a message leaves the index when it is first read. fastupdate off: no
-- pending list that every probe would scan until the next vacuum.
CREATE INDEX IF NOT EXISTS q_jobs_waiting_idx ON pgmq.q_jobs USING gin (message jsonb_path_ops)
    WITH (fastupdate = off) WHERE read_ct = 0;

-- Every message, by content. The worker reads first-class messages first (docs/ARCHITECTURE.md §4,
-- jobqueue.queries.READ_FIRST: `message @> ANY({"job": "reference_process"}, ..., {"first": true})`),
-- a retry (read before) included: the few such messages, found whatever the length of the queue.
CREATE INDEX IF NOT EXISTS q_jobs_message_idx ON pgmq.q_jobs USING gin (message jsonb_path_ops)
    WITH (fastupdate = off);
