"""A photo's derived files: N DNP subjects in it give N+1 files and N+1 thumbnails.

Every render bumps `variant_version` and puts it in every key, so no object a row
points at is ever overwritten. Keys go onto the rows once every file is uploaded;
`processed_at` is written last and publishes the row. All of it commits with the
message's delete; the objects the rows stopped pointing at are deleted after the
commit (faces/rendering/sweep.py).
"""

import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from faces.matching import PhotoMatch
from faces.media.kinds import MediaKind
from faces.media.media import Checkpoint, Media, never_stop
from faces.models import Face, Photo, PhotoVariant
from faces.rendering import keys
from faces.rendering.blur import region_box

# Uploads are network waits, not CPU: they overlap the next file's render and encode
# (OpenCV releases the GIL). The pool lives as long as the process so that each
# thread keeps its S3 connection (django-storages holds one per thread).
UPLOAD_THREADS = 4
_uploads = ThreadPoolExecutor(max_workers=UPLOAD_THREADS, thread_name_prefix="upload")


@dataclass(frozen=True)
class PlannedFile:
    viewer: uuid.UUID | None  # None: the public file
    faces: list[Face]  # the faces this file blurs


def plan_files(photo: Photo, match: PhotoMatch | None, *, always: bool = False) -> list[PlannedFile]:
    """The public file plus one per DNP member matched in the photo; none at all when nothing is blurred
    (unless `always`: an upload that may not be published as itself, a clip or a still with more in its
    bytes than the picture the worker saw)."""
    if match is None:
        viewers, decisions = [None], {None: []}
    else:
        viewers = [None, *match.own_file_users()]
        decisions = {viewer: match.blurred(viewer) for viewer in viewers}
    if not always and not photo.blur_regions and not any(decisions[None]):
        return []
    faces = match.faces if match else []
    return [
        PlannedFile(viewer, [face for face, blurred in zip(faces, decisions[viewer], strict=True) if blurred])
        for viewer in viewers
    ]


def render_plan(photo: Photo, planned: list[PlannedFile]) -> dict:
    """What a render's files blur, as photos.render_plan keeps it: the blur regions, and the ids of the
    faces each file blurs ("public", or a DNP member's user id). Faces never move once stored, so two
    renders with the same plan write the same files (faces/jobs/photo_jobs.py, `reprocess`)."""
    blurred = {str(file.viewer or "public"): sorted(str(face.id) for face in file.faces) for file in planned}
    return {"regions": photo.blur_regions, "public": [], **blurred}


def plan_of(photo: Photo, match: PhotoMatch | None) -> dict:
    """The render plan the photo's files would have now (every file planned, as for a clip)."""
    return render_plan(photo, plan_files(photo, match, always=True))


def render_and_publish(
    photo: Photo, media: Media, match: PhotoMatch | None, between_frames: Checkpoint = never_stop
) -> int:
    """Render the upload's files (faces/media/), upload them and point the rows at the new version; returns
    how many were written. `between_frames` is the try's checkpoint (jobqueue/context.py).

    With nothing to blur the public keys are the upload's, but only when its bytes are exactly the picture
    the worker saw (Still.published_as_is; a clip's never are); else the public file is rendered.
    """
    width, height = media.width, media.height
    planned = plan_files(photo, match, always=not media.published_as_is)
    token = start_version(photo, width, height, media.kind, media.duration_ms)
    regions = [region_box(region, width, height) for region in photo.blur_regions]
    painters = media.painters(planned, match.faces if match else [], regions)
    rendered = media.render(painters, between_frames)
    encoded = ((file.data, file.poster) for file in rendered)
    return publish_files(photo, planned, encoded, media.extension, token, between_frames)


def publish_files(
    photo: Photo,
    planned: list[PlannedFile],
    encoded: Iterable[tuple[bytes, bytes]],
    ext: str,
    token: str,
    checkpoint: Checkpoint,
) -> int:
    """Upload each planned file (its bytes and its JPEG thumbnail, in `encoded`) under this try's folder
    (`token`, from start_version), then point the rows at them and publish. The uploads run in the pool
    while the next file is encoded. A try whose session the server closed writes nothing (`checkpoint`,
    jobqueue/context.py): another reader may be on its message; one that writes anyway writes its own keys."""
    checkpoint()
    pairs = zip(planned, encoded, strict=True)
    uploaded = [_upload(photo, file.viewer, data, thumb, ext, token) for file, (data, thumb) in pairs]
    _wait_for_all(uploaded)
    for viewer, (key, thumb_key, _) in zip([file.viewer for file in planned], uploaded, strict=True):
        _point_at(photo, viewer, key, thumb_key)
    if not planned:
        _point_public_at_upload(photo)
    _drop_stale_variants(photo, [file.viewer for file in planned if file.viewer is not None])
    photo.render_plan = render_plan(photo, planned)
    photo.save(update_fields=["render_plan"])
    publish(photo)
    return len(planned)


def start_version(photo: Photo, width: int, height: int, media_type: MediaKind, duration_ms: int | None) -> str:
    """Bump the version this render commits; returns the try's token for its keys (faces/rendering/keys.py)."""
    photo.variant_version += 1
    photo.width, photo.height = width, height
    photo.media_type, photo.duration_ms = media_type, duration_ms
    photo.save(update_fields=["variant_version", "width", "height", "media_type", "duration_ms"])
    return keys.try_token()


def publish(photo: Photo) -> None:
    """The last write of a job, once every file and thumbnail is in storage: it publishes the row."""
    photo.processed_at = timezone.now()
    photo.save(update_fields=["processed_at"])


def _point_public_at_upload(photo: Photo) -> None:
    photo.public_key, photo.public_thumb_key = photo.upload_key, photo.upload_thumb_key
    photo.save(update_fields=["public_key", "public_thumb_key"])


def _drop_stale_variants(photo: Photo, viewers: list[uuid.UUID]) -> None:
    """Members who no longer get a file lose their row; their objects go in the sweep after commit."""
    PhotoVariant.objects.filter(photo=photo).exclude(user_id__in=viewers).delete()


def _upload(
    photo: Photo, viewer: uuid.UUID | None, data: bytes, thumb: bytes, ext: str, token: str
) -> tuple[str, str, list]:
    """Starts the two uploads in the pool; returns the keys and their futures."""
    if viewer is None:
        key, thumb_key = keys.public_keys(photo.event_id, photo.id, photo.variant_version, token, ext)
    else:
        key, thumb_key = keys.user_keys(photo.event_id, photo.id, photo.variant_version, token, viewer, ext)
    return key, thumb_key, [_uploads.submit(put, key, data), _uploads.submit(put, thumb_key, thumb)]


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
        photo.save(update_fields=["public_key", "public_thumb_key"])
    else:
        PhotoVariant.objects.update_or_create(
            photo=photo,
            user_id=viewer,
            defaults={"variant_version": photo.variant_version, "key": key, "thumb_key": thumb_key},
        )


def put(key: str, data: bytes) -> None:
    saved = default_storage.save(key, ContentFile(data))
    if saved != key:
        raise RuntimeError(f"storage wrote {saved} instead of {key}")
