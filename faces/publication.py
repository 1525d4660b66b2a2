"""Publication: the one place that sets and clears `photos.processed_at` (docs/ARCHITECTURE.md §5, rule 1).

A photo is public while processed_at is set. A render publishes it once every file is in storage, writing the
row's new version, size, kind, keys and plan in the same UPDATE; three things take it out of the feed until a
later render publishes it again: hide-first (faces/exposure.py), the archive of a job that named it
(faces/jobs/archive_hooks.py) and the archive of an event's reprocess (faces/jobs/photo_jobs.py).
"""

from django.db.models import QuerySet
from django.utils import timezone

from faces.models import Photo

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


def publish(photo: Photo) -> None:
    """The last write of a render: the row the render filled in (RENDERED_ROW), published."""
    photo.processed_at = timezone.now()
    photo.save(update_fields=RENDERED_ROW)


def unpublish(photos: QuerySet) -> int:
    """Take `photos` out of the public feed (in the caller's transaction); how many were public."""
    return photos.filter(processed_at__isnull=False).update(processed_at=None)
