"""A photo's derived files: N DNP subjects in it give N+1 files and N+1 thumbnails (the plan: faces/publication.py).

Every render bumps `variant_version` and puts it in every key, so no object a row
points at is ever overwritten. Keys go onto the rows once every file is uploaded, and
the photo row is written once, last, publishing it (faces/publication.py). All of it
commits with the message's delete; the objects the rows stopped pointing at are
deleted after the commit (faces/rendering/sweep.py).

Derived object keys (docs/ARCHITECTURE.md §3): only the worker builds these, always versioned. A render's folder is
`v{version}.{try}`: the version its rows will commit, and a token of the try that writes it. Two tries of one version
(a try cut off from its session, still uploading, and the retry that commits) never write the same key, so no try
ever replaces an object a committed row names. Keys written before the token (`v{version}/`) are still derived keys:
read, swept, never written again.
"""

import logging
import re
import secrets
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import cache

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from faces.checkpoint import Checkpoint, never_stop
from faces.media.upload import Media
from faces.models import Photo, PhotoVariant
from faces.people import PhotoMatch
from faces.publication import PlannedFile, plan_files, publish, render_plan, storage_down
from faces.rendering.painters import painters_of, region_box

log = logging.getLogger("faces.rendering")

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Every shape the worker writes, and so the only shapes it may ever delete.
DERIVED_KEY = re.compile(
    rf"^events/(?P<event>{UUID})/photos/(?P<photo>{UUID})/v(?P<version>[1-9][0-9]*)(?:\.[0-9a-f]{{8}})?/"
    rf"(?:public|user_{UUID})(?:_thumb)?\.(?:jpg|webp|mp4)$"
)


@dataclass(frozen=True)
class Uploads:
    """How a render's files go to storage."""

    # Uploads are network waits, not CPU: this many overlap the next file's render and encode (OpenCV releases the GIL).
    threads: int = 4
    # A file's upload is tried again after these pauses when storage blips (each try is botocore's own three).
    retry_pauses_s: tuple[float, ...] = (1.0, 2.0, 4.0)


UPLOADS = Uploads()


@cache
def upload_pool() -> ThreadPoolExecutor:
    """Started by the first render, then kept as long as the process, so that each thread keeps its S3
    connection (django-storages holds one per thread); a process that never renders starts no thread."""
    return ThreadPoolExecutor(max_workers=UPLOADS.threads, thread_name_prefix="upload")


def render_and_publish(
    photo: Photo, media: Media, match: PhotoMatch | None, checkpoint: Checkpoint = never_stop
) -> int:
    """Render the upload's files (faces/media/), upload them and point the rows at the new version; returns
    how many were written. `checkpoint` is the try's (jobqueue/context.py).

    With nothing to blur the public keys are the upload's, but only when its bytes are exactly the picture
    the worker saw (Still.published_as_is; a clip's never are); else the public file is rendered.
    """
    width, height = media.width, media.height
    planned = plan_files(photo, match, always=not media.published_as_is)
    # The version this render commits, on the row in memory (saved when it publishes).
    photo.variant_version += 1
    regions = [region_box(region, width, height) for region in photo.blur_regions]
    painters = painters_of([file.faces for file in planned], match.faces if match else [], regions, width, height)
    rendered = media.render(painters, checkpoint)
    encoded = ((file.data, file.poster) for file in rendered)
    files = upload_files(photo, planned, encoded, media.extension)
    # Read once every frame went by: a video's duration is the clock its frames' times come from.
    photo.width, photo.height, photo.media_type, photo.duration_ms = width, height, media.kind, media.duration_ms
    publish(photo)
    return files


def upload_files(
    photo: Photo,
    planned: list[PlannedFile],
    encoded: Iterable[tuple[bytes, bytes]],
    ext: str,
) -> int:
    """Upload each planned file (its bytes and its JPEG thumbnail, in `encoded`) in this try's own folder
    (`render_keys`), then point the rows at them, in memory for the photo row (`publish` writes
    it). The uploads run in the pool while the next file is encoded. A try whose session the server closed
    writes nothing (the render's last checkpoint comes before the first file is given, Media.render): another
    reader may be on its message; one that writes anyway writes its own keys, in the folder the `render_folder`
    line names: no row names them unless this try commits, and the sweeps delete them (tests/chaos checks both
    for every try cut off from its session)."""
    viewers = [file.viewer for file in planned]
    written = render_keys(photo.event_id, photo.id, photo.variant_version, viewers, ext)
    log.info("render_folder", extra={"photo_id": str(photo.id), "folder": written.folder})
    pairs = zip(viewers, encoded, strict=True)
    uploaded = [_upload(*written.files[viewer], data, thumb) for viewer, (data, thumb) in pairs]
    _wait_for_all(uploaded)
    for viewer, (key, thumb_key, _) in zip(viewers, uploaded, strict=True):
        _point_at(photo, viewer, key, thumb_key)
    if not planned:
        _point_public_at_upload(photo)
    _drop_stale_variants(photo, [viewer for viewer in viewers if viewer is not None])
    photo.render_plan = render_plan(photo, planned)
    return len(planned)


def _point_public_at_upload(photo: Photo) -> None:
    photo.public_key, photo.public_thumb_key = photo.upload_key, photo.upload_thumb_key


def _drop_stale_variants(photo: Photo, viewers: list[uuid.UUID]) -> None:
    """Members who no longer get a file lose their row; their objects go in the sweep after commit."""
    PhotoVariant.objects.filter(photo=photo).exclude(user_id__in=viewers).delete()


def _upload(key: str, thumb_key: str, data: bytes, thumb: bytes) -> tuple[str, str, list]:
    """Starts the two uploads in the pool; returns the keys and their futures."""
    return key, thumb_key, [upload_pool().submit(put, key, data), upload_pool().submit(put, thumb_key, thumb)]


def _wait_for_all(uploaded: list) -> None:
    """Every upload ends before the job goes on, failed or not: none may land after the
    try has rolled back and its sweep has listed what to delete."""
    futures = [future for _, _, pair in uploaded for future in pair]
    wait(futures)
    for future in futures:
        future.result()


def _point_at(photo: Photo, viewer: uuid.UUID | None, key: str, thumb_key: str) -> None:
    if viewer is None:
        photo.public_key, photo.public_thumb_key = key, thumb_key
    else:
        PhotoVariant.objects.update_or_create(
            photo=photo,
            user_id=viewer,
            defaults={"variant_version": photo.variant_version, "key": key, "thumb_key": thumb_key},
        )


def put(key: str, data: bytes) -> None:
    """Write one file; a blip of storage (faces.publication.storage_down) is retried here, UPLOADS.retry_pauses_s
    apart, so that a long render (a clip's minutes) is not lost for one failed upload. A longer outage reaches the
    consumer, which waits it out (jobqueue/outage.py)."""
    for delay_s in (*UPLOADS.retry_pauses_s, None):
        try:
            saved = default_storage.save(key, ContentFile(data))
            break
        except Exception as error:
            if delay_s is None or not storage_down(error):
                raise
            log.warning("upload_retry", extra={"key": key, "error": str(error)[:200], "retry_s": delay_s})
            time.sleep(delay_s)
    if saved != key:
        raise RuntimeError(f"storage wrote {saved} instead of {key}")


def photo_prefix(event_id, photo_id) -> str:
    return f"events/{event_id}/photos/{photo_id}/"


@dataclass(frozen=True)
class RenderKeys:
    """The keys one try's render writes: its folder, and each file's key and its thumbnail's, by viewer (None:
    the public file)."""

    folder: str
    files: dict[uuid.UUID | None, tuple[str, str]]


def render_keys(event_id, photo_id, version: int, viewers: list[uuid.UUID | None], ext: str = "jpg") -> RenderKeys:
    """The keys of a new try's render of `version`, for the public file and each viewer's: in a folder of its
    own (a new token), each file (`ext`: jpg, webp for an animated image, mp4 for a video) beside its
    thumbnail, always a JPEG."""
    folder = f"{photo_prefix(event_id, photo_id)}v{version}.{secrets.token_hex(4)}/"
    bases = {viewer: folder + ("public" if viewer is None else f"user_{viewer}") for viewer in viewers}
    return RenderKeys(folder, {viewer: (f"{base}.{ext}", f"{base}_thumb.jpg") for viewer, base in bases.items()})


def derived_version(key: str) -> int | None:
    """The version of a key of a derived shape; None for any other key (an upload, a stranger's file)."""
    found = DERIVED_KEY.match(key)
    return int(found["version"]) if found else None
