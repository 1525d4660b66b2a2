"""Publication (docs/ARCHITECTURE.md §5): what a photo's published files blur, the storage they are published to, and
the one place that sets and clears `photos.processed_at` (rule 1).

A render plans its files first (`plan_files`): the public file and one per DNP member matched, each with the faces it
blurs; `render_plan` is what photos.render_plan keeps of them, and hide-first compares it with what a render would
plan now (faces/exposure.py). The files go to storage (faces/rendering/files.py), whose outages are told apart from a
job's own failure here (`storage_down`; `storage_unusable` also when storage refuses the worker's keys).

A photo is public while processed_at is set. A render publishes it once every file is in storage, writing the row's
new version, size, kind, keys and plan in the same UPDATE; three things take it out of the feed until a later render
publishes it again: hide-first (faces/exposure.py), the archive of a job that named it (faces/jobs/archive_hooks.py)
and the archive of an event's reprocess (faces/jobs/photo_jobs.py).
"""

import uuid
from dataclasses import dataclass

import botocore.exceptions
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.db.models import QuerySet
from django.utils import timezone
from storages.backends.s3 import S3Storage

from faces.models import Face, Photo
from faces.people import PhotoMatch, match_of
from momentlens.storage import PROBE_TIMEOUTS, client_config

# Every column of the photo row a render writes: one UPDATE, the job's last write.
RENDERED_ROW = (
    "variant_version",
    "width",
    "height",
    "media_type",
    "duration_ms",
    "public_key",
    "public_thumb_key",
    "render_plan",
    "processed_at",
)
# Codes by which S3 says the service, not the request, is at fault (an answer with a 5xx status is too).
_SERVICE_CODES = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "RequestTimeTooSkewed"}
# Where worker_check's storage check and the outage probe write their small objects: no row names them.
PROBE_PREFIX = "_worker_check/"


@dataclass(frozen=True)
class PlannedFile:
    viewer: uuid.UUID | None  # None: the public file
    faces: list[Face]  # the faces this file blurs


def plan_files(photo: Photo, match: PhotoMatch | None, *, always: bool = False) -> list[PlannedFile]:
    """The public file plus one per DNP member matched in the photo; none at all when nothing is blurred
    (unless `always`: an upload that may not be published as itself, a clip or a still with more in its
    bytes than the picture the worker saw)."""
    decisions = {None: []} if match is None else match.by_file
    if not always and not photo.blur_regions and not any(decisions[None]):
        return []
    faces = match.faces if match else []
    return [
        PlannedFile(viewer, [face for face, blurred in zip(faces, chosen, strict=True) if blurred])
        for viewer, chosen in decisions.items()
    ]


def faces_blurred_in(photo: Photo, viewer: uuid.UUID | None = None) -> list[Face]:
    """Which of the photo's stored faces the file `viewer` sees blurs (None: the public file, which a member
    without a file of their own sees too), matched now and planned as a render plans: what the demo report and
    the chaos checks hold the published files to."""
    files = {file.viewer: file.faces for file in plan_files(photo, match_of(photo, photo.shown_size), always=True)}
    return files.get(viewer, files[None])


def render_plan(photo: Photo, planned: list[PlannedFile]) -> dict:
    """What a render's files blur, as photos.render_plan keeps it: the blur regions, and the ids of the
    faces each file blurs ("public", or a DNP member's user id). Faces never move once stored, so two
    renders with the same plan write the same files (faces/jobs/photo_jobs.py, `reprocess`)."""
    blurred = {str(file.viewer or "public"): sorted(str(face.id) for face in file.faces) for file in planned}
    return {"regions": photo.blur_regions, "public": [], **blurred}


def plan_of(photo: Photo, match: PhotoMatch | None) -> dict:
    """The render plan the photo's files would have now (every file planned, as for a clip)."""
    return render_plan(photo, plan_files(photo, match, always=True))


def publish(photo: Photo) -> None:
    """The last write of a render: the row the render filled in (RENDERED_ROW), published."""
    photo.processed_at = timezone.now()
    photo.save(update_fields=RENDERED_ROW)


def unpublish(photos: QuerySet) -> int:
    """Take `photos` out of the public feed (in the caller's transaction); how many were public."""
    return photos.filter(processed_at__isnull=False).update(processed_at=None)


def storage_down(error: BaseException) -> bool:
    """Whether `error` says storage cannot be reached or failed on its side: an outage (jobqueue/outage.py), not
    the job's failure. A refused or reset connection, a timeout, a 5xx answer; not a 4xx (a missing object, a
    denied request: the request's own fault, unless storage refuses the worker itself: `storage_unusable`)."""
    # Refused and timed-out connections (ConnectionError), and a connection lost while reading (HTTPClientError).
    if isinstance(error, botocore.exceptions.ConnectionError | botocore.exceptions.HTTPClientError):
        return True
    if isinstance(error, botocore.exceptions.ClientError):
        return _status(error) >= 500 or str(error.response.get("Error", {}).get("Code")) in _SERVICE_CODES
    return False


def storage_unusable(error: BaseException) -> bool:
    """Storage's outage as the consumer waits it out (faces/apps.py): `storage_down`, or a refusal (401, 403) that
    the probe meets too. Then storage refuses the worker itself (its keys revoked, mistyped or made read-only): no
    job is at fault and every job would fail alike, so they wait for the operator's fix instead of being archived.
    A refusal of one object alone, while the probe is answered, stays that job's failure. (A HEAD, as a read's
    first request, gets a bare 403 without a code, so the probe is what tells the two apart.)"""
    if storage_down(error):
        return True
    if not storage_refuses(error):
        return False
    try:
        probe_storage()
    except Exception:
        return True
    return False


def storage_refuses(error: BaseException) -> bool:
    """Whether storage refused the request (401, 403): the worker's keys, or that one object."""
    return isinstance(error, botocore.exceptions.ClientError) and _status(error) in (401, 403)


def _status(error: botocore.exceptions.ClientError) -> int:
    return error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0


def round_trip(key: str, payload: bytes, storage: Storage = default_storage) -> bytes:
    """Write `payload` at `key`, read it back, delete it: what was read back. Raises what storage raises."""
    saved = storage.save(key, ContentFile(payload))
    with storage.open(saved, "rb") as handle:
        read_back = handle.read()
    storage.delete(saved)
    return read_back


def probe_storage() -> None:
    """Raises while storage is down: one small object written, read and deleted, since a storage that answers
    reads while its writes fail (a partial outage) would otherwise end the wait for a try that fails again. On S3
    through a client that gives up within seconds (momentlens.storage.PROBE_TIMEOUTS): a storage that hangs must not
    hold the reader, which reads privacy work between probes."""
    round_trip(f"{PROBE_PREFIX}outage-probe.txt", b"outage probe", probing_storage())


def probing_storage() -> Storage:
    """The default storage, or on S3 the same bucket through a client with the probe's timeouts."""
    options = settings.STORAGES["default"].get("OPTIONS", {})
    if "client_config" not in options:
        return default_storage
    return S3Storage(**{**options, "client_config": client_config(PROBE_TIMEOUTS)})
