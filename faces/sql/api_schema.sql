-- The mirror of the tables the Express API owns (docs/ARCHITECTURE.md §2).
-- The worker never migrates these: dev and tests load this file into the
-- embedded PostgreSQL, and the Django models read them with managed = False.
-- Requires the pgvector extension.

CREATE TABLE events (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_members (
    event_id        uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    user_id         uuid NOT NULL,
    status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'left', 'removed')),
    do_not_publish  boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, user_id)
);
-- Candidates for matching: "the event's active members" (the PK serves by event).
CREATE INDEX event_members_user_idx ON event_members (user_id);

CREATE TABLE subject_references (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id       uuid NOT NULL,
    upload_key    text NOT NULL,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'ready', 'no_face', 'many_faces', 'failed')),
    embedding     vector(512),
    engine        text,
    box           jsonb,            -- {"x","y","w","h"}: fractions of the reference image
    processed_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subject_references_user_idx ON subject_references (user_id);
-- The sweep never deletes an object a row names as an upload (docs/ARCHITECTURE.md §3).
CREATE INDEX subject_references_upload_key_idx ON subject_references (upload_key);

CREATE TABLE photos (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id           uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    uploader_id        uuid NOT NULL,
    upload_key         text NOT NULL,
    upload_thumb_key   text NOT NULL,
    width              integer,
    height             integer,
    media_type         text CHECK (media_type IN ('image', 'animated', 'video')),  -- written by the worker
    duration_ms        integer,                     -- animated images and videos
    blur_regions       jsonb NOT NULL DEFAULT '[]',  -- [{"x","y","w","h"}] fractions
    render_plan        jsonb,                       -- written by the worker: what the current files blur
    variant_version    integer NOT NULL DEFAULT 0,
    public_key         text,
    public_thumb_key   text,
    faces_detected_at  timestamptz,
    processed_at       timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX photos_event_idx ON photos (event_id);
CREATE INDEX photos_upload_key_idx ON photos (upload_key);
CREATE INDEX photos_upload_thumb_key_idx ON photos (upload_thumb_key);

CREATE TABLE photo_variants (
    photo_id         uuid NOT NULL REFERENCES photos (id) ON DELETE CASCADE,
    user_id          uuid NOT NULL,
    variant_version  integer NOT NULL,
    key              text NOT NULL,
    thumb_key        text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (photo_id, user_id)
);

CREATE TABLE unknown_clusters (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    event_id    uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    centroid    vector(512) NOT NULL,
    face_count  integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX unknown_clusters_event_idx ON unknown_clusters (event_id);

CREATE TABLE faces (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    photo_id            uuid NOT NULL REFERENCES photos (id) ON DELETE CASCADE,
    event_id            uuid NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    box_x               double precision NOT NULL,  -- fractions of the stored image
    box_y               double precision NOT NULL,
    box_w               double precision NOT NULL,
    box_h               double precision NOT NULL,
    landmarks           jsonb NOT NULL,             -- [[x, y] * 5] fractions
    det_score           real NOT NULL,
    embedding           vector(512) NOT NULL,
    engine              text NOT NULL,
    frame_time          double precision,           -- seconds from the first frame; NULL for stills
    track               integer,                    -- faces of one clip linked across frames; NULL for stills
    embedding_norm      real,                       -- the recogniser's feature norm: how well it saw a face
    matched_user_id     uuid,
    matched_through     uuid,                       -- the face of the event it was matched through (faces/links.py)
    similarity          real,
    unknown_cluster_id  uuid REFERENCES unknown_clusters (id) ON DELETE SET NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX faces_photo_idx ON faces (photo_id);
CREATE INDEX faces_event_idx ON faces (event_id);
CREATE INDEX faces_unknown_cluster_idx ON faces (unknown_cluster_id);
CREATE INDEX faces_matched_through_idx ON faces (matched_through) WHERE matched_through IS NOT NULL;
