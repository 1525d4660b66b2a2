"""Every SQL statement of the faces app written out, named, in one place (tests/unit/test_sql_home.py keeps them here).

The ORM writes the rest. What is here is what the ORM says badly: pgvector's distance, a face's embedding in its
binary form, the catalogue. Values always travel as parameters (tests/test_sql_parameters.py).
"""

# The hide's candidates (faces.exposure): published photos of an event (1) with a face of an engine (2) whose box
# lies within an edge fraction (3) of the image's border, or that the recogniser saw too poorly to judge (an
# embedding norm under (4)), or whose cosine distance to a ready reference, or to a candidate face of an ambiguous
# one, of one of some users (5) is at most a distance (6). pgvector's `<=>` finds them in the database, without
# reading a single embedding into Python.
CANDIDATE_PHOTOS = """
    SELECT DISTINCT face.photo_id
    FROM faces AS face
    JOIN photos AS photo ON photo.id = face.photo_id AND photo.processed_at IS NOT NULL
    WHERE face.event_id = %s AND face.engine = %s
      AND (
        least(face.box_x, face.box_y, 1 - face.box_x - face.box_w, 1 - face.box_y - face.box_h) <= %s
        OR face.embedding_norm < %s
        OR EXISTS (
            SELECT 1 FROM subject_references AS reference
            CROSS JOIN LATERAL (
                SELECT reference.embedding WHERE reference.status = 'ready'
                UNION ALL
                SELECT candidate::text::vector FROM jsonb_array_elements(reference.candidate_embeddings) AS candidate
                WHERE reference.status = 'many_faces'
            ) AS known (embedding)
            WHERE reference.user_id = ANY(%s) AND reference.engine = face.engine
              AND (face.embedding <=> known.embedding) <= %s
        )
      )
"""
# The hide's candidates when the worker cannot tell who is who (faces.exposure): every published photo of an
# event (1) with a face of an engine (2).
PHOTOS_WITH_FACES = """
    SELECT DISTINCT face.photo_id
    FROM faces AS face
    JOIN photos AS photo ON photo.id = face.photo_id AND photo.processed_at IS NOT NULL
    WHERE face.event_id = %s AND face.engine = %s
"""
# The stored faces of some photos (1), as a render matches them, ordered by photo then id (faces.exposure). The
# embedding as pgvector's binary form (vector_send: two int16 words, then big-endian float4s): read straight into
# an array, where its text form would be parsed number by number (about 0.1 ms a face: seconds for a big event).
FACES_OF_PHOTOS = """
    SELECT id, photo_id, box_x, box_y, box_w, box_h, landmarks, vector_send(embedding), engine, track, embedding_norm
    FROM faces WHERE photo_id = ANY(%s) ORDER BY photo_id, id
"""

# Members found through their event's faces (faces.links). The faces of an event (3) and engine (4), outside a
# photo (5), that no member is matched to and that were seen well enough to judge (an embedding norm of (6) or
# more), within cosine distance (2) of one of some embeddings (1, pgvector's text form); locked, those another
# transaction holds skipped: that one is a job of their own photo, which links them itself once this one commits.
UNMATCHED_NEAR = """
    SELECT face.id
    FROM faces AS face
    WHERE EXISTS (
        SELECT 1 FROM unnest(%s::text[]) AS near (embedding) WHERE (face.embedding <=> near.embedding::vector) <= %s
    )
      AND face.event_id = %s AND face.engine = %s AND face.photo_id <> %s
      AND face.matched_user_id IS NULL AND face.embedding_norm >= %s
    FOR UPDATE OF face SKIP LOCKED
"""
# The faces that may be source faces within cosine distance (2) of one of some embeddings (1), nearest first, with
# their member and similarity: faces of an event (3) and engine (4), outside a photo (6), matched to one of some
# users (5) by the member's references (not through another face).
SOURCES_NEAR = """
    SELECT source.id, source.matched_user_id, max(1 - (source.embedding <=> near.embedding::vector)) AS similarity
    FROM faces AS source
    JOIN unnest(%s::text[]) AS near (embedding) ON (source.embedding <=> near.embedding::vector) <= %s
    WHERE source.event_id = %s AND source.engine = %s AND source.matched_user_id = ANY(%s)
      AND source.photo_id <> %s AND source.matched_through IS NULL
    GROUP BY source.id, source.matched_user_id
    ORDER BY similarity DESC
"""

# The pgvector check (faces.checks): the installed extension's version, no row when it is not installed.
PGVECTOR_VERSION = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
# What the pgvector check's hint tells an operator to run where it is missing. The worker never runs it: the
# API's migrations do.
INSTALL_PGVECTOR = "CREATE EXTENSION vector"
# The tables check (faces.checks): every column of some tables (1) of the public schema, as (table, column).
PUBLIC_COLUMNS = """
    SELECT table_name, column_name FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name = ANY(%s)
"""
