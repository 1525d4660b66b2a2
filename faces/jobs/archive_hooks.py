"""What every archived message does to the photo it names, whatever the job (docs/ARCHITECTURE.md §4).

A message archived after failing (or unreadable, or for an unknown job) may be the one
that would have applied a DNP change: the photo it names leaves the public feed, in the
archive's transaction, until a later job publishes it again.
"""

import uuid

from faces.models import Photo
from faces.publication import unpublish
from jobqueue.api import register_archive_hook


def unpublish_named_photo(payload: dict | None) -> int:
    photo_id = _photo_id(payload)
    if photo_id is None:
        return 0
    return unpublish(Photo.objects.filter(id=photo_id))


def _photo_id(payload: dict | None) -> uuid.UUID | None:
    """The photo a decoded message names, if any, even when it is not a valid job."""
    try:
        return uuid.UUID(payload["photo_id"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


register_archive_hook("unpublished", unpublish_named_photo)
