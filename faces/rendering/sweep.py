"""Delete the derived objects no row points at any more.

The worker is the only writer under a photo's derived prefix
(`events/{event}/photos/{photo}/`), and it writes rows before it commits, so after
a commit anything under that prefix that the rows do not name is garbage: a
replaced version, or what a failed try left behind. Sweeping the prefix is the
durable record of a delete that failed: the next sweep of that photo (its next
job, or `manage.py sweep_orphans`) finds the object again. Upload keys live under
`uploads/`, outside every derived prefix, and are never deleted.
"""

import logging

from django.core.files.storage import default_storage

from faces.models import Photo, PhotoVariant
from faces.rendering.keys import photo_prefix
from jobqueue.logfmt import kv

log = logging.getLogger("faces.sweep")


def referenced_keys(photo_id) -> set[str]:
    photo = Photo.objects.filter(id=photo_id).values("public_key", "public_thumb_key").first()
    keys = set(photo.values()) if photo else set()
    for key, thumb_key in PhotoVariant.objects.filter(photo_id=photo_id).values_list("key", "thumb_key"):
        keys.update((key, thumb_key))
    return {key for key in keys if key}


def sweep_photo(event_id, photo_id) -> int:
    """Delete every object under the photo's derived prefix that no row points at; returns how many."""
    prefix = photo_prefix(event_id, photo_id)
    keep = referenced_keys(photo_id)
    deleted = 0
    for key in list_objects(prefix):
        if key not in keep:
            default_storage.delete(key)
            deleted += 1
    if deleted:
        log.info(kv("sweep", photo_id=photo_id, deleted=deleted))
    return deleted


def sweep_after_commit(event_id, photo_id) -> None:
    """Best effort right after the job commits; a failure is logged and the next sweep retries it."""
    try:
        sweep_photo(event_id, photo_id)
    except Exception as error:  # storage down: the objects stay until the next sweep finds them
        log.warning(kv("sweep_failed", photo_id=photo_id, error=f"{type(error).__name__}: {error}"))


def list_objects(prefix: str) -> list[str]:
    """Every key under `prefix`, on either storage backend."""
    try:
        folders, files = default_storage.listdir(prefix)
    except FileNotFoundError:
        return []
    keys = [f"{prefix}{name}" for name in files]
    for folder in folders:
        keys += list_objects(f"{prefix}{folder}/")
    return keys
