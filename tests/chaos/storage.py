"""The bucket against the photo rows: snapshots, orphans, objects whose bytes changed, files a clip must not have."""

import time
from dataclasses import dataclass, field

import numpy as np

from tests.chaos.services import BUCKET, Services
from tests.chaos.uploads import MediaUpload
from tests.support.stored_files import read_bytes

# The file a multi-frame upload is rendered into, by photos.media_type: never the upload's own kind or key.
MEDIA_EXTENSIONS = {"animated": "webp", "video": "mp4"}
SNAPSHOT_ROWS = (
    "SELECT p.id::text, p.variant_version, p.processed_at IS NOT NULL, p.upload_key, p.upload_thumb_key, "
    "p.public_key, p.public_thumb_key, "
    "ARRAY(SELECT unnest(ARRAY[v.key, v.thumb_key]) FROM photo_variants v WHERE v.photo_id = p.id) FROM photos p"
)


@dataclass(frozen=True)
class PhotoRow:
    version: int
    published: bool
    uploads: frozenset[str]
    named: frozenset[str]  # public_key, public_thumb_key and every variant's keys


@dataclass(frozen=True)
class Snapshot:
    """The photo rows, then the bucket listed: a key listed after the rows were read is judged against them."""

    rows: dict[str, PhotoRow]
    keys: list[str]
    taken: float
    etags: dict[str, str] = field(default_factory=dict)  # each listed key's ETag: its bytes' digest


def storage_snapshot(services: Services, attempts: int = 60, client=None) -> Snapshot:
    with services.db(attempts) as conn:
        rows = conn.execute(SNAPSHOT_ROWS).fetchall()  # one statement: one snapshot of photos and variants
    client = client or services.s3.client()
    etags = {
        obj["Key"]: obj.get("ETag", "")
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="events/")
        for obj in page.get("Contents", [])
    }
    photos = {
        photo_id: PhotoRow(
            version,
            published,
            frozenset({upload, upload_thumb}),
            frozenset(key for key in (public, public_thumb, *variants) if key),
        )
        for photo_id, version, published, upload, upload_thumb, public, public_thumb, variants in rows
    }
    return Snapshot(photos, list(etags), time.monotonic(), etags)


def replaced_named_objects(snapshot: Snapshot, first_seen: dict[str, str]) -> set[str]:
    """Keys a committed row names whose bytes (ETag) differ from when a row was first seen naming them."""
    replaced = set()
    for row in snapshot.rows.values():
        for key in row.named - row.uploads:
            etag = snapshot.etags.get(key)
            if etag is not None and first_seen.setdefault(key, etag) != etag:
                replaced.add(key)
    return replaced


def derived_photo(key: str) -> tuple[str, int] | None:
    """(photo id, version) of a derived object's key; None for any other key."""
    from faces.rendering.files import DERIVED_KEY

    found = DERIVED_KEY.match(key)
    return (found["photo"].lower(), int(found["version"])) if found else None


def orphan_keys(snapshot: Snapshot) -> set[str]:
    """Derived objects nothing points at: a key of a derived shape that no row names, whose photo row is gone
    or whose version is not newer than the row's committed variant_version (a newer one may be a job in flight).
    Upload keys are never orphans."""
    uploads = {key for row in snapshot.rows.values() for key in row.uploads}
    orphans = set()
    for key in snapshot.keys:
        derived = derived_photo(key)
        if derived is None or key in uploads:
            continue
        row = snapshot.rows.get(derived[0])
        if row is None or (key not in row.named and derived[1] <= row.version):
            orphans.add(key)
    return orphans


def exposed_media(snapshot: Snapshot, media: dict[str, MediaUpload], refused: dict[str, str]) -> set[tuple[str, str]]:
    """(photo id, why) of each multi-frame upload published as itself or rendered from one frame: a row naming
    an upload object as a file, a file (named or only listed) of another kind than its clip's (an animation is
    rendered into .webp, a video into .mp4; thumbnails are JPEG posters; a .jpg file is one frame), or a refused
    one published or with any file."""
    return (
        clip_rows_exposing(snapshot, media)
        | refused_rows_exposing(snapshot, refused)
        | listed_keys_exposing(snapshot, media, refused)
    )


def clip_rows_exposing(snapshot: Snapshot, media: dict[str, MediaUpload]) -> set[tuple[str, str]]:
    exposed = set()
    for photo_id, upload in media.items():
        row = snapshot.rows.get(photo_id)
        if row is None:
            continue
        if row.named & row.uploads:
            exposed.add((photo_id, "a row names the upload object as a file"))
        exposed |= {
            (photo_id, f"a row names a file of another kind: {key}")
            for key in row.named
            if not media_file_kind_ok(key, upload.kind)
        }
    return exposed


def refused_rows_exposing(snapshot: Snapshot, refused: dict[str, str]) -> set[tuple[str, str]]:
    return {
        (photo_id, "a refused upload is published")
        for photo_id in refused
        if (row := snapshot.rows.get(photo_id)) is not None and (row.published or row.named & row.uploads)
    }


def listed_keys_exposing(
    snapshot: Snapshot, media: dict[str, MediaUpload], refused: dict[str, str]
) -> set[tuple[str, str]]:
    exposed = set()
    for key in snapshot.keys:
        photo_id = (derived_photo(key) or (None,))[0]
        if photo_id in refused:
            exposed.add((photo_id, f"a refused upload has a file: {key}"))
        elif photo_id in media and not media_file_kind_ok(key, media[photo_id].kind):
            exposed.add((photo_id, f"a file of another kind: {key}"))
    return exposed


def media_file_kind_ok(key: str, kind: str) -> bool:
    """A clip's file is of its kind (.webp, .mp4); its thumbnail a JPEG poster."""
    return key.endswith("_thumb.jpg") or key.endswith(f".{MEDIA_EXTENSIONS[kind]}")


def object_exists(client, key: str) -> bool:
    import botocore.exceptions

    try:
        client.head_object(Bucket=BUCKET, Key=key)
        return True
    except botocore.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in {"404", "NoSuchKey", "NotFound"}:
            return False
        raise


def read_image(key: str) -> np.ndarray:
    """The file as a viewer sees it: its orientation applied, transparency over white."""
    from tests.support.published_pictures import shown

    return shown(read_bytes(key))
