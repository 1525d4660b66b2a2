-- momentlens_worker: the database role a worker machine logs in as (docs/OPERATIONS.md,
-- "The worker's database role"). It can do exactly the worker's work, and nothing else:
-- read and write its rows of the API's tables, consume the `jobs` queue through pgmq,
-- and read the archive for the ops commands. It owns nothing, creates nothing, and
-- cannot alter, drop or truncate any table.
--
-- Run it as the tables' owner: on Supabase, as `postgres` in the SQL editor; elsewhere
--     psql "$ADMIN_DATABASE_URL" -v ON_ERROR_STOP=1 -f deploy/worker_role.sql
-- It is plain SQL (no psql variables), holds no secret, and can be run again at any
-- time: every run brings the role back to exactly these grants (after a new pgmq
-- version, or after someone granted it more). The password is set apart from it,
-- never written in a file:
--     psql: \password momentlens_worker
--     Supabase SQL editor: ALTER ROLE momentlens_worker WITH PASSWORD '<a long random secret>';
--
-- Where each grant comes from: each package's SQL lives in its queries module (tests/unit/test_sql_home.py):
-- jobqueue/queries.py (the consumer's, worker_check's, queue_status's and requeue_archived's statements),
-- faces/queries.py (the hide's candidates, worker_check's), and faces/ (the jobs' ORM writes).
-- tests/test_worker_role.py runs the real worker as this role and checks what it cannot do.
-- A change to what the worker reads or writes changes this file and that test's table.

BEGIN;

-- The role: it logs in and that is all. No password here (set it as above); NOINHERIT
-- and no memberships, so it never has more than what is granted to it by name.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'momentlens_worker') THEN
        CREATE ROLE momentlens_worker LOGIN;
    END IF;
END
$$;
ALTER ROLE momentlens_worker WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS;

-- Start from nothing in both schemas: a re-run drops any grant not listed below.
-- (REVOKE on a table also revokes its column grants.)
REVOKE ALL ON SCHEMA public, pgmq FROM momentlens_worker;
REVOKE ALL ON ALL TABLES IN SCHEMA public, pgmq FROM momentlens_worker;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public, pgmq FROM momentlens_worker;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgmq FROM momentlens_worker;

-- USAGE only: it may name what is in them. Never CREATE (the check at the end makes
-- sure PUBLIC does not hand it CREATE either).
GRANT USAGE ON SCHEMA public TO momentlens_worker;
GRANT USAGE ON SCHEMA pgmq TO momentlens_worker;

-- ---------------------------------------------------------------------------------
-- The API's tables (faces/sql/api_schema.sql). SELECT on the whole table everywhere:
-- the worker reads whole rows, and faces.checks.tables (worker_check) reads every
-- column's name from information_schema, which shows only columns the role may use.
-- UPDATE is by column on the API's own rows (photos, subject_references): the worker
-- writes its result columns there and never the API's (upload keys, blur_regions,
-- owners). The rows the worker itself creates (faces, photo_variants,
-- unknown_clusters) it writes whole. No DELETE except where a job removes its own
-- rows, and never TRUNCATE: the API deletes events and photos, and the cascades run
-- as the tables' owner.
-- ---------------------------------------------------------------------------------

-- reprocess_event: does the event exist (faces/jobs/photo_jobs.py). Read-only.
GRANT SELECT ON events TO momentlens_worker;

-- Matching's candidates (faces/people.py), thumbnail_dims's "any active DNP member?"
-- (faces/jobs/photo_jobs.py), reference_process's "events this user is in". Read-only:
-- membership and DNP choices are the API's.
GRANT SELECT ON event_members TO momentlens_worker;

-- Candidates' references (faces/people.py), the sweep's "is this key an upload?"
-- (faces/rendering/sweep.py). reference_process records its result
-- (faces/jobs/reference_process.py: record_reference, the archive hook mark_failed),
-- on the row it locks with SELECT ... FOR UPDATE (which needs an UPDATE grant).
GRANT SELECT ON subject_references TO momentlens_worker;
GRANT UPDATE (status, embedding, engine, box, candidate_embeddings, processed_at) ON subject_references TO momentlens_worker;

-- Every photo job locks its photo (SELECT ... FOR UPDATE, faces/jobs/photo_jobs.py) and
-- writes its result in one UPDATE, publish in faces/publication.py (variant_version, width, height, media_type,
-- duration_ms, the public keys, the render plan and processed_at), and faces_detected_at in
-- faces/detection/__init__.py; hide first (hide_exposed, faces/exposure.py), unpublish_event and the archive
-- hook unpublish_named_photo (faces/jobs/archive_hooks.py) clear processed_at through faces/publication.py's
-- unpublish. The sweep reads under the same lock.
GRANT SELECT ON photos TO momentlens_worker;
GRANT UPDATE (variant_version, width, height, media_type, duration_ms, public_key, public_thumb_key,
               render_plan, faces_detected_at, processed_at)
    ON photos TO momentlens_worker;

-- A DNP member's own file (faces/rendering/files.py): update_or_create per viewer, and
-- the rows of members who no longer get one are deleted. The sweep reads the keys.
GRANT SELECT, INSERT, UPDATE, DELETE ON photo_variants TO momentlens_worker;

-- detect_and_store inserts each detected face (faces/detection/__init__.py); matching sets
-- matched_user_id and similarity, clustering unknown_cluster_id (faces/people.py). The
-- worker never deletes a face: a photo's faces go with it.
GRANT SELECT, INSERT, UPDATE ON faces TO momentlens_worker;

-- faces/people.py: a face joins the nearest cluster (UPDATE centroid, face_count,
-- under SELECT ... FOR UPDATE) or starts one (INSERT); a cluster whose last face is
-- matched is deleted.
GRANT SELECT, INSERT, UPDATE, DELETE ON unknown_clusters TO momentlens_worker;

-- ---------------------------------------------------------------------------------
-- The queue. pgmq's functions are SECURITY INVOKER: they run with this role's
-- privileges, so each table they touch needs its grant here, for the one queue `jobs`.
-- Another queue's tables (pgmq.q_<name>, pgmq.a_<name>) stay out of its reach, and so
-- do pgmq's other tables (all but meta).
-- ---------------------------------------------------------------------------------

-- pgmq.q_jobs, the queue itself:
--   SELECT: pgmq.read (FOR UPDATE SKIP LOCKED, RETURNING), pgmq.metrics (counts), and the
--           WHERE and RETURNING of every statement below;
--   UPDATE: pgmq.read (vt, read_ct, last_read_at), pgmq.set_vt (vt: a retry made visible
--           now, and the heartbeat that keeps a long job hidden), RECORD_ARCHIVE_REASON
--           (headers) and MAKE_ABANDONED_VISIBLE (vt) in jobqueue/queries.py;
--   DELETE: DELETE (a job's message, in the job's transaction) and pgmq.archive's move;
--   INSERT: pgmq.send: reference_process and reprocess_event enqueue follow-up jobs
--           (jobqueue/enqueue.py), requeue_archived re-sends a message.
-- Table-wide UPDATE rather than by column: pgmq versions differ in which columns their
-- functions write. Indexes on q_jobs are the owner's to create, not the worker's.
GRANT SELECT, INSERT, UPDATE, DELETE ON pgmq.q_jobs TO momentlens_worker;

-- pgmq.a_jobs, the archive: pgmq.archive inserts the message it moves; queue_status,
-- requeue_archived and event_report read it. Never UPDATE or DELETE: the archive is
-- the record of what failed.
GRANT SELECT, INSERT ON pgmq.a_jobs TO momentlens_worker;

-- pgmq.metrics reads the queue's sequence (last_value: total messages ever sent).
-- pgmq.send needs nothing more: msg_id is an identity column.
GRANT SELECT ON SEQUENCE pgmq.q_jobs_msg_id_seq TO momentlens_worker;

-- pgmq.list_queues() reads pgmq.meta: the `queue` check of worker_check.
GRANT SELECT ON pgmq.meta TO momentlens_worker;

-- EXECUTE on the pgmq functions the worker calls, and the ones they call in turn.
-- PostgreSQL grants EXECUTE to PUBLIC by default, so these matter only where that was
-- revoked; they are listed so that the role's needs are here in full. Any other pgmq
-- function (create, drop_queue, purge_queue, ...) can only do what the table grants
-- above allow, which is none of it. A signature that this pgmq version does not have
-- is skipped.
DO $$
DECLARE
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'pgmq.read(text,integer,integer,jsonb)',             -- queries.READ
        'pgmq.archive(text,bigint)',                         -- queries.ARCHIVE
        'pgmq.set_vt(text,bigint,integer)',                  -- queries.MAKE_VISIBLE, the heartbeat
        'pgmq.set_vt(text,bigint,timestamp with time zone)', -- what set_vt(integer) calls
        'pgmq.send(text,jsonb,jsonb)',                       -- queries.SEND
        'pgmq.send(text,jsonb,jsonb,timestamp with time zone)', -- what send(3 args) calls
        'pgmq.send_batch(text,jsonb[])',                     -- queries.SEND_UNLESS_WAITING (reprocess_event)
        'pgmq.send_batch(text,jsonb[],jsonb[],timestamp with time zone)', -- what send_batch(2 args) calls
        'pgmq.metrics(text)',                                -- queries.METRICS (/health, queue_status, worker_check)
        'pgmq.list_queues()',                                -- worker_check's queue check
        'pgmq.format_table_name(text,text)'                  -- every function above: q_jobs from 'jobs'
    ] LOOP
        IF to_regprocedure(fn) IS NOT NULL THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO momentlens_worker', fn);
        END IF;
    END LOOP;
END
$$;

-- Needs no grant (PUBLIC has these in every PostgreSQL): pg_try_advisory_lock and
-- pg_advisory_unlock (the reader lock), pg_advisory_lock_shared and pg_advisory_unlock_shared
-- (the reader's count of slots), the pg_locks view (its holder, for the log and
-- queue_status), set_config/current_setting/pg_backend_pid (application_name, the
-- session probe), pg_extension and information_schema (worker_check), pgvector's
-- type, operators and functions.

-- pgvector outside `public` (Supabase installs extensions in `extensions`): the worker
-- names the `vector` type and its operators unqualified, so the role may use that
-- schema and has it on its search_path.
DO $$
DECLARE
    vector_schema name;
BEGIN
    SELECT n.nspname INTO vector_schema
    FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'vector';
    IF vector_schema IS NOT NULL AND vector_schema <> 'public' THEN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO momentlens_worker', vector_schema);
        EXECUTE format('ALTER ROLE momentlens_worker SET search_path = public, %I', vector_schema);
    ELSE
        ALTER ROLE momentlens_worker RESET search_path;
    END IF;
END
$$;

-- Row level security: where it is on for one of the worker's tables (Supabase suggests
-- it for every table in `public`, and its dashboard turns it on for queues), a role with
-- no policy sees no row at all, and every job would end as "row gone". The worker's
-- work spans every event, so it gets one permissive policy on each such table; what it
-- may do to the rows is still only what the grants above allow. Tables without RLS get
-- no policy.
DO $$
DECLARE
    rel regclass;
BEGIN
    FOREACH rel IN ARRAY ARRAY[
        'public.events', 'public.event_members', 'public.subject_references', 'public.photos',
        'public.photo_variants', 'public.faces', 'public.unknown_clusters',
        'pgmq.q_jobs', 'pgmq.a_jobs', 'pgmq.meta'
    ]::regclass[] LOOP
        IF EXISTS (SELECT FROM pg_policy WHERE polrelid = rel AND polname = 'momentlens_worker') THEN
            EXECUTE format('DROP POLICY momentlens_worker ON %s', rel);
        END IF;
        IF (SELECT relrowsecurity FROM pg_class WHERE oid = rel) THEN
            EXECUTE format(
                'CREATE POLICY momentlens_worker ON %s TO momentlens_worker USING (true) WITH CHECK (true)', rel
            );
        END IF;
    END LOOP;
END
$$;

-- What it must not have, whoever granted it: refuse to finish (and roll all of this
-- back) rather than leave a role that can create objects or borrow another role's rights.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_auth_members WHERE member = 'momentlens_worker'::regrole) THEN
        RAISE EXCEPTION 'momentlens_worker is a member of another role'
            USING HINT = 'REVOKE that role FROM momentlens_worker: it must hold only the grants in this file';
    END IF;
    IF has_schema_privilege('momentlens_worker', 'public', 'CREATE') THEN
        RAISE EXCEPTION 'momentlens_worker can create objects in schema public (through PUBLIC)'
            USING HINT = 'REVOKE CREATE ON SCHEMA public FROM PUBLIC (the default since PostgreSQL 15)';
    END IF;
    IF has_schema_privilege('momentlens_worker', 'pgmq', 'CREATE') THEN
        RAISE EXCEPTION 'momentlens_worker can create objects in schema pgmq (through PUBLIC)'
            USING HINT = 'REVOKE CREATE ON SCHEMA pgmq FROM PUBLIC';
    END IF;
    IF has_database_privilege('momentlens_worker', current_database(), 'CREATE') THEN
        RAISE EXCEPTION 'momentlens_worker can create schemas in database %', current_database()
            USING HINT = format('REVOKE CREATE ON DATABASE %I FROM PUBLIC', current_database());
    END IF;
END
$$;

COMMIT;
