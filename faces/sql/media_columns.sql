-- The media columns (docs/ARCHITECTURE.md §2, §11), for a database made from the mirror before
-- they were in it: the API's own migration adds the same. Idempotent.
ALTER TABLE photos ADD COLUMN IF NOT EXISTS media_type text
    CHECK (media_type IN ('image', 'animated', 'video'));
ALTER TABLE photos ADD COLUMN IF NOT EXISTS duration_ms integer;
ALTER TABLE faces ADD COLUMN IF NOT EXISTS frame_time double precision;
ALTER TABLE faces ADD COLUMN IF NOT EXISTS track integer;
