-- The worker's part of the database, applied as the tables' owner after the API's migrations
-- (docs/OPERATIONS.md, "From the embedded defaults to production", step 4). Idempotent: run it again
-- after every update of the worker; a second run changes nothing. The worker's own role cannot run it.
--   psql "$ADMIN_DATABASE_URL" -X -v ON_ERROR_STOP=1 -f deploy/database.sql
-- The embedded PostgreSQL of dev and tests runs the same steps when it provisions itself
-- (momentlens/devservices/postgres.py).

-- pgvector: the API's migrations create it (its embedding columns need it); here only if they did not.
CREATE EXTENSION IF NOT EXISTS vector;

-- pgmq. On Supabase the extension ("Queues" in the dashboard); a server where pgmq was installed from
-- its SQL (the embedded PostgreSQL) already has the schema.
DO $$
BEGIN
    IF to_regnamespace('pgmq') IS NULL THEN
        CREATE EXTENSION pgmq;
    END IF;
END
$$;

-- The queue the API sends to and the worker reads.
SELECT pgmq.create('jobs') WHERE NOT EXISTS (SELECT 1 FROM pgmq.list_queues() WHERE queue_name = 'jobs');

\ir ../faces/sql/worker_columns.sql
\ir queue_indexes.sql
