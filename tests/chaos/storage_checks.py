"""The bucket and the rows at the end: every named key there, no orphan, uploads untouched, outcomes kept."""

import hashlib
import time
from collections import Counter

from jobqueue.messages import is_uuid
from tests.chaos.services import BUCKET
from tests.chaos.storage import Snapshot, object_exists, orphan_keys, replaced_named_objects
from tests.chaos.worker_logs import ended

# Why a worker refuses an upload: a valid clip of the seed that ends so was not processed.
REFUSALS = ("unsupported_media", "undecodable_media", "media_too_large", "undecodable_image", "image_too_large")


def missing_row_keys(chaos) -> int:
    from faces.models import Photo, PhotoVariant

    client = chaos.services.s3.client()
    keys = [k for row in Photo.objects.values_list("public_key", "public_thumb_key") for k in row if k]
    keys += [k for row in PhotoVariant.objects.values_list("key", "thumb_key") for k in row]
    return sum(1 for key in keys if not object_exists(client, key))


def orphans_left(chaos, snapshot: Snapshot) -> int:
    """Orphans still there once the workers had their sweep intervals; and how long any orphan lived."""
    watch, report, now = chaos.watch.orphans, chaos.report, time.monotonic()
    left = orphan_keys(snapshot)
    watch.observe(left, snapshot.taken)
    report.orphans_seen = watch.seen()
    report.orphan_longest_s, key = watch.longest(now)
    report.figures.storage_samples, report.figures.storage_samples_skipped = watch.samples, watch.skipped
    report.notes.append(
        f"storage monitor: {watch.samples} samples, one every {watch.mean_interval():.2f} s on average, "
        f"{watch.skipped} skipped during faults"
        + (f"; longest-lived orphan: {key} ({report.orphan_longest_s:.1f} s)" if key else "")
    )
    report.notes += [f"orphan left: {key}, first seen {now - watch.open[key]:.1f} s ago" for key in sorted(left)[:5]]
    return len(left)


def changed_uploads(chaos) -> int:
    client = chaos.services.s3.client()
    changed = 0
    for key, digest in chaos.seeded.upload_hashes.items():
        try:
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        except Exception:
            changed += 1
            continue
        changed += hashlib.sha256(body).hexdigest() != digest
    return changed


def replaced_named(chaos, snapshot: Snapshot) -> int:
    """Objects a committed row named whose bytes another try replaced: the monitor's, and the end's."""
    watch = chaos.watch
    watch.replaced_named |= replaced_named_objects(snapshot, watch.named_etags)
    chaos.report.notes += [f"replaced after a row named it: {key}" for key in sorted(watch.replaced_named)[:5]]
    return len(watch.replaced_named)


def outcome_mismatches(chaos, lines: list[dict]) -> int:
    """The last outcome of each photo's jobs, from the worker's own log lines, against the rows and files; and
    each clip of the seed the worker refused (a clip is processed like a photo, as it once was not)."""
    from faces.models import Photo

    last, refused = last_ends(lines), clips_refused(chaos, lines)
    mismatches = 0
    for photo in Photo.objects.filter(id__in=[p for p in last if is_uuid(p)]):
        outcome = last[str(photo.id)]["outcome"]
        if outcome == "archived" and photo.processed_at is not None:
            if rendered_since(lines, photo, last[str(photo.id)]):
                continue
            mismatches += 1
        elif outcome == "completed" and (photo.processed_at is None or not expected_files_present(chaos, photo)):
            mismatches += 1
            chaos.report.notes.append(f"photo {photo.id} completed without its files")
    media = chaos.seeded.media_photos
    chaos.report.notes += [
        f"clip refused: photo {photo_id} ({media[photo_id].name}): {reason}" for photo_id, reason in refused
    ]
    return mismatches + len(refused)


def last_ends(lines: list[dict]) -> dict[str, dict]:
    """photo id -> the end line (outcome completed or archived) of its last job that changed it."""
    return {
        fields["photo_id"]: fields
        for fields in changing_ends(lines)
        if "photo_id" in fields and fields.get("outcome") in {"completed", "archived"}
    }


def rendered_since(lines: list[dict], photo, end: dict) -> bool:
    """Whether the files the photo's row names were rendered after `end`: a later try published it, whose own end
    line a kill right after its commit took with it (its message deleted, never read again)."""
    folder = photo.public_key.rsplit("/", 1)[0] + "/"
    return any(
        fields["event"] == "render_folder" and fields.get("folder") == folder and fields["asctime"] > end["asctime"]
        for fields in lines
    )


def clips_refused(chaos, lines: list[dict]) -> list[tuple[str, str]]:
    """(photo id, reason) of each clip of the seed whose last refusal is logged, in photo id order."""
    refused = {
        fields["photo_id"]: fields["reason"]
        for fields in changing_ends(lines)
        if fields.get("reason") in REFUSALS and fields.get("photo_id") in chaos.seeded.media_photos
    }
    return sorted(refused.items())


def changing_ends(lines: list[dict]) -> list[dict]:
    """The ends of the jobs that changed their photo: a thumbnail_dims after a render changes nothing (the
    photo is as the job before left it)."""
    return [fields for fields in ended(lines) if fields.get("detail") != "already_rendered"]


def expected_files_present(chaos, photo) -> bool:
    """N DNP subjects matched → N+1 files and thumbnails under the current version; none when nothing is blurred,
    unless the upload is an animation or a video (it is never published as itself: its N+1 files always)."""
    from faces.models import EventMember
    from faces.publication import faces_blurred_in
    from faces.rendering.files import photo_prefix

    dnp = set(EventMember.objects.dnp().filter(event_id=photo.event_id).values_list("user_id", flat=True))
    own = {face.matched_user_id for face in photo.faces.all() if face.matched_user_id in dnp}
    needs_files = bool(photo.blur_regions) or bool(faces_blurred_in(photo, None))
    # The committed try's folder (v{version}.{try}/); any try's folder of the version when nothing was rendered.
    rendered = photo.public_key != photo.upload_key
    version_folders = f"{photo_prefix(photo.event_id, photo.id)}v{photo.variant_version}."
    prefix = photo.public_key.rsplit("/", 1)[0] + "/" if rendered else version_folders
    listed = chaos.services.s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("KeyCount", 0)
    always_rendered = str(photo.id) in chaos.seeded.media_photos or str(photo.id) in chaos.seeded.rendered_stills
    if not needs_files and not always_rendered:
        return listed == 0 and not rendered
    return rendered and listed == 2 * (1 + len(own))


def sweep_summary(lines: list[dict]) -> str:
    """What the workers' own sweeps did, from their log lines."""
    count: Counter = Counter(fields["event"] for fields in lines)
    deleted = sum(int(f.get("deleted", 0)) for f in lines if f["event"] in {"sweep", "sweep_storage"})
    pending = [float(f.get("pending_s", 0)) for f in lines if f["event"] == "sweep_retried"]
    return (
        f"workers' sweeps: {count['sweep']} photo sweeps deleted objects, {count['sweep_failed']} failed "
        f"(remembered), {count['sweep_retried']} retried when idle (pending at most {max(pending, default=0):.1f} s), "
        f"{count['sweep_storage']} full storage sweeps; {deleted} objects deleted in all"
    )
