"""Delete the derived objects nothing points at any more (docs/ARCHITECTURE.md §3, §5 rule 5).

The photo's derived prefix (`events/{event}/photos/{photo}/`) is the durable record:
whatever lies there of a derived shape, that no row names and that is not newer than
the row's committed `variant_version`, is garbage (a replaced version, or what a
failed try left behind). What the sweep may delete, and nothing else:

- only keys of the worker's own derived shapes (files.DERIVED_KEY): an upload the API
  stored under the prefix is never touched, and no key that any photo or reference
  row names as its upload is deleted, whatever its shape;
- never a version newer than the committed `variant_version`: a job in flight may be
  writing it (its row lock is held, the sweep reads under the same lock and skips a
  photo whose lock is taken);
- every derived object of a photo or event whose row no longer exists.

Three things run it: each photo job right after its commit; the worker itself, every
WORKER_SWEEP_RETRY_S between jobs, for every photo whose after-commit sweep failed
(storage blip) or found the photo busy; and a periodic full sweep of storage when the
queue is empty (also `manage.py sweep_orphans`), which finds what a crash between
commit and sweep left, and deleted photos and events. The full sweep lists storage
flat (1,000 keys per S3 LIST call) and only visits photos that have derived objects; the
worker's stops for any message and goes on from there when the queue is empty again, so a
large bucket never holds back a Do Not Publish change (`FullSweep`).
"""

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg.errors
from django.core.files.storage import default_storage
from django.db import OperationalError, transaction
from django.db.models import Q

from faces.models import Photo, PhotoVariant, SubjectReference
from faces.rendering.files import DERIVED_KEY, derived_version, photo_prefix

log = logging.getLogger("faces.sweep")


class PhotoBusy(Exception):
    """A job holds the photo's row lock: sweep it later."""


@dataclass(frozen=True)
class Committed:
    """What the photo's committed rows say, read under its row lock."""

    exists: bool
    variant_version: int
    keys: frozenset[str]


def sweep_photo(event_id, photo_id, listed: list[str] | None = None) -> int:
    """Delete the photo's garbage objects (among `listed`, else what its prefix holds now); returns how many.

    PhotoBusy while a job holds its row. A listing older than the lock is safe: a key written
    since is not in it, and versions only grow, so what was garbage then still is.
    """
    try:
        with transaction.atomic():
            committed = locked_state(photo_id)
            keys = list_keys(photo_prefix(event_id, photo_id)) if listed is None else listed
            garbage = [key for key in keys if is_garbage(key, committed)]
            garbage = without_upload_keys(garbage)
            for key in garbage:
                default_storage.delete(key)
    except OperationalError as error:
        if isinstance(error.__cause__, psycopg.errors.LockNotAvailable):
            raise PhotoBusy(f"photo {photo_id} is locked by a job") from None
        raise
    if garbage:
        log.info("sweep", extra={"photo_id": photo_id, "deleted": len(garbage), "photo_exists": committed.exists})
    return len(garbage)


def locked_state(photo_id) -> Committed:
    """The photo's committed version and keys, its row locked (NOWAIT) until the transaction ends."""
    photo = (
        Photo.objects.select_for_update(nowait=True)
        .filter(id=photo_id)
        .values("variant_version", "public_key", "public_thumb_key")
        .first()
    )
    if photo is None:
        return Committed(exists=False, variant_version=0, keys=frozenset())
    keys = {photo["public_key"], photo["public_thumb_key"]}
    for key, thumb_key in PhotoVariant.objects.filter(photo_id=photo_id).values_list("key", "thumb_key"):
        keys.update((key, thumb_key))
    return Committed(True, photo["variant_version"], frozenset(key for key in keys if key))


def is_garbage(key: str, committed: Committed) -> bool:
    version = derived_version(key)
    if version is None or key in committed.keys:
        return False
    return not committed.exists or version <= committed.variant_version


def without_upload_keys(keys: list[str]) -> list[str]:
    """Drop any key that a photo or reference row names as its upload: uploads are never deleted."""
    if not keys:
        return keys
    uploads = set(
        Photo.objects.filter(Q(upload_key__in=keys) | Q(upload_thumb_key__in=keys)).values_list(
            "upload_key", "upload_thumb_key"
        )
    )
    named = {key for pair in uploads for key in pair}
    named |= set(SubjectReference.objects.filter(upload_key__in=keys).values_list("upload_key", flat=True))
    return [key for key in keys if key not in named]


def sweep_storage(event_id: str | None = None) -> tuple[int, int]:
    """Sweep every photo with derived objects in storage (of this event), rows or not; returns (deleted, busy).

    A busy photo is remembered for the worker's next retry.
    """
    prefix = "events/" if event_id is None else f"events/{event_id}/photos/"
    tally = SweepTally()
    for photo, keys in photos_in_storage(prefix):
        tally.sweep(photo, keys)
    return tally.deleted, tally.busy


def photos_in_storage(prefix: str, after: str = "") -> Iterator[tuple[tuple[str, str], list[str]]]:
    """((event, photo), its derived keys) of every photo under `prefix` with keys past `after`, in key order, each
    photo once its keys are listed: a photo's keys share its folder, so they come together."""
    photo, keys = None, []
    for key in list_keys(prefix, after=after):
        if (parts := DERIVED_KEY.match(key)) is None:
            continue
        if (parts["event"], parts["photo"]) != photo:
            if keys:
                yield photo, keys
            photo, keys = (parts["event"], parts["photo"]), []
        keys.append(key)
    if keys:
        yield photo, keys


@dataclass
class SweepTally:
    """What a sweep of many photos did so far; a busy photo is remembered for the worker's next retry."""

    deleted: int = 0
    busy: int = 0

    def sweep(self, photo: tuple[str, str], keys: list[str]) -> None:
        try:
            self.deleted += sweep_photo(*photo, listed=keys)
        except PhotoBusy:
            self.busy += 1
            remember(*photo)


# -- sweeps that failed, retried by the worker (faces/jobs/maintenance.py) --------

_pending: dict[tuple[str, str], float] = {}


def remember(event_id, photo_id) -> None:
    _pending.setdefault((str(event_id), str(photo_id)), time.monotonic())


def sweep_after_commit(event_id, photo_id) -> None:
    """Right after the job commits; a failure is remembered and retried (sweep_pending), never dropped."""
    try:
        sweep_photo(event_id, photo_id)
    except Exception as error:  # storage down or photo busy: the objects stay until a later sweep
        remember(event_id, photo_id)
        log.warning(
            "sweep_failed", extra={"photo_id": photo_id, "error": f"{type(error).__name__}: {error}", "retry": "later"}
        )


def sweep_pending() -> int:
    """Retry every remembered sweep; what fails again stays remembered. Returns how many succeeded. A failure other
    than a busy photo ends the round: storage that failed one photo fails the next, and each call to a storage that
    hangs takes its timeouts (momentlens.storage.StorageTimeouts), a round of them the reader's time for minutes."""
    done = 0
    for event_id, photo_id in list(_pending):
        try:
            sweep_photo(event_id, photo_id)
        except Exception as error:  # still failing: stays pending
            log.warning(
                "sweep_failed",
                extra={"photo_id": photo_id, "error": f"{type(error).__name__}: {error}", "retry": "later"},
            )
            if isinstance(error, PhotoBusy):
                continue
            break
        waited = time.monotonic() - _pending.pop((event_id, photo_id))
        log.info("sweep_retried", extra={"photo_id": photo_id, "pending_s": round(waited, 1)})
        done += 1
    return done


@dataclass
class FullSweep(SweepTally):
    """The worker's full sweep of storage: run while the queue is empty, it stops at the first photo done after a
    message comes, and the next run goes on from there (`after`: the last key it swept), however large the bucket."""

    prefix: str = "events/"  # every event's folder
    after: str = ""

    def run(self, message_waiting: Callable[[], bool]) -> bool:
        """True when it reached the end of storage (and starts over next time); False when it stopped for a message."""
        for photo, keys in photos_in_storage(self.prefix, after=self.after):
            self.sweep(photo, keys)
            self.after = keys[-1]
            if message_waiting():
                so_far = {"deleted": self.deleted, "busy": self.busy, "after": self.after}
                log.info("sweep_storage_stopped", extra=so_far)
                return False
        log.info("sweep_storage", extra={"deleted": self.deleted, "busy": self.busy})
        self.deleted, self.busy, self.after = 0, 0, ""
        return True


# The worker's, kept between its runs (faces/jobs/maintenance.py).
FULL_SWEEP = FullSweep()


def list_keys(prefix: str, after: str = "") -> Iterator[str]:
    """Every key under `prefix` past `after`, in key order: one flat listing on S3, 1,000 keys a call, each call as
    the keys are wanted; a walk on the filesystem."""
    bucket = getattr(default_storage, "bucket", None)
    if bucket is not None:
        listing = {"Prefix": prefix, **({"Marker": after} if after else {})}
        return (item.key for item in bucket.objects.filter(**listing))
    return (key for key in sorted(_walk(prefix)) if key > after)


def _walk(prefix: str) -> list[str]:
    try:
        found, files = default_storage.listdir(prefix)
    except FileNotFoundError:
        return []
    keys = [f"{prefix}{name}" for name in files]
    for folder in found:
        keys += _walk(f"{prefix}{folder}/")
    return keys
