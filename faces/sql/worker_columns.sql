-- The columns the worker writes beyond the API's first schema (docs/ARCHITECTURE.md §2): the media
-- columns (§11), the blur a photo's files were rendered with (§5, "Hide first") and how
-- well the recogniser saw each face, which face a face was matched through and, for a `many_faces` reference, the faces any of which may be its
-- subject's (§6, "Matching and the blur decision").
-- For a database made from the mirror before they were in it: the API's own migration adds the same.
-- Idempotent.
ALTER TABLE photos ADD COLUMN IF NOT EXISTS media_type text
    CHECK (media_type IN ('image', 'animated', 'video'));
ALTER TABLE photos ADD COLUMN IF NOT EXISTS duration_ms integer;
ALTER TABLE photos ADD COLUMN IF NOT EXISTS render_plan jsonb;
ALTER TABLE faces ADD COLUMN IF NOT EXISTS frame_time double precision;
ALTER TABLE faces ADD COLUMN IF NOT EXISTS track integer;
ALTER TABLE faces ADD COLUMN IF NOT EXISTS embedding_norm real;
-- A face matched through another face of its event (faces/links.py): that face's id; NULL for a face matched by
-- its member's references, or unmatched. No foreign key: the API deletes a photo's faces as it likes.
ALTER TABLE faces ADD COLUMN IF NOT EXISTS matched_through uuid;
CREATE INDEX IF NOT EXISTS faces_matched_through_idx ON faces (matched_through) WHERE matched_through IS NOT NULL;
-- A JSON list of 512-number lists: pgvector has no list-of-vectors type the ORM reads.
ALTER TABLE subject_references ADD COLUMN IF NOT EXISTS candidate_embeddings jsonb;
