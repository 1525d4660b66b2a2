"""The photo jobs (docs/ARCHITECTURE.md §5): face_process, thumbnail_dims, reprocess, reprocess_event."""

import logging

from django.db import transaction

from faces import media
from faces.checkpoint import Checkpoint
from faces.detection import detect_and_store
from faces.engines import FACE_ENGINE
from faces.exposure import hide_exposed
from faces.links import name_and_cluster
from faces.media import Media, MediaKind, read_object
from faces.models import Event, EventMember, Photo
from faces.people import PhotoMatch, match_faces
from faces.publication import plan_of, unpublish
from faces.rendering.files import render_and_publish
from faces.rendering.sweep import sweep_after_commit
from jobqueue.api import JobContext, RowGone, enqueue_unless_waiting, lock_fan_out, register

log = logging.getLogger("faces.jobs")


@register("face_process", id_field="photo_id")
def face_process(payload: dict, ctx: JobContext) -> dict:
    return face_path(locked_photo(payload["photo_id"]), ctx)


@register("thumbnail_dims", id_field="photo_id")
def thumbnail_dims(payload: dict, ctx: JobContext) -> dict:
    photo = locked_photo(payload["photo_id"])
    if photo.variant_version != 0:
        # Another job already rendered this photo: a re-sent message must not undo it.
        return {"detail": "already_rendered", "files": 0}
    if has_active_dnp_member(photo.event_id):
        # An unblurred publish could show a DNP face: fail closed, take the face path.
        return {**face_path(photo, ctx), "detail": "dnp_member_present"}
    upload = media.open(read_object(photo.upload_key))
    if upload.kind is not MediaKind.IMAGE:
        # Never published as itself: a clip is always rendered, frame by frame, from its faces.
        return {**face_path(photo, ctx, upload), "detail": "multi_frame"}
    # Blur regions, or more in the bytes than one plain picture, give rendered files; else the upload is public.
    files = render_and_publish(photo, upload, None, ctx.checkpoint)
    _sweep_when_committed(photo)
    return {"files": files, **_rendered_because(upload)}


@register("reprocess", id_field="photo_id")
def reprocess(payload: dict, ctx: JobContext) -> dict:
    photo = locked_photo(payload["photo_id"])
    # The face path re-matches the stored faces and never detects again; the one photo it
    # detects on is one published without any face pass (thumbnail_dims): its first and only.
    if photo.faces_detected_at is None:
        return {**face_path(photo, ctx), "detail": "first_detection"}
    if photo.processed_at is not None:
        # A published photo whose files would not change is not rendered again: its matches are recorded.
        match = match_faces(photo, (photo.width, photo.height))
        if plan_of(photo, match) == photo.render_plan:
            name_and_cluster(match)
            return {"faces": len(match.faces) if match else 0, "files": 0, "detail": "unchanged"}
        return publish_path(photo, media.open(read_object(photo.upload_key)), match, ctx.checkpoint)
    return face_path(photo, ctx)


def unpublish_event(payload: dict) -> int:
    """The archive's hook (docs/ARCHITECTURE.md §5, rule 7): a DNP change that could not be applied
    leaves no old file up."""
    return unpublish(Photo.objects.filter(event_id=payload["event_id"]))


@register("reprocess_event", id_field="event_id", on_archive=unpublish_event, first=True)
def reprocess_event(payload: dict, ctx: JobContext) -> dict:
    event_id = Event.objects.filter(id=payload["event_id"]).values_list("id", flat=True).first()
    if event_id is None:
        raise RowGone(f"event {payload['event_id']} does not exist")
    # Two of these for one event, run at once by two readers, would each see nothing waiting:
    # the second waits here for the first to commit, then finds its messages waiting.
    lock_fan_out("reprocess", event_id)
    # Every photo rendered before, published or not: a photo unpublished by this job's own
    # final failure (unpublish_event) is published again when the job is re-sent. Every photo
    # of the event is locked first, not only the rendered ones: a photo job another reader is
    # running holds its photo's lock, and may have read the members and references before the
    # change this job is for. Waiting for it shows its render, which is then redone.
    photos = Photo.objects.select_for_update().filter(event_id=event_id).order_by("created_at", "id")
    photo_ids = [photo_id for photo_id, version in photos.values_list("id", "variant_version") if version > 0]
    # Hide first: what the change exposes is unpublished in this transaction and rendered before
    # ordinary work (docs/ARCHITECTURE.md §5).
    hidden = hide_exposed(event_id)
    first = enqueue_unless_waiting("reprocess", "photo_id", hidden, first=True)
    # A reprocess still waiting (never read) will read the change this job is for: not sent again. One
    # whose files would not change renders nothing (`reprocess`).
    hidden_ids = set(hidden)
    rest = [photo_id for photo_id in photo_ids if photo_id not in hidden_ids]
    sent = enqueue_unless_waiting("reprocess", "photo_id", rest)
    return {"hidden": len(hidden), "enqueued": first + sent, "already_waiting": len(rest) - sent}


def face_path(photo: Photo, ctx: JobContext, upload: Media | None = None) -> dict:
    """Detect (unless faces are already stored), match, render, publish, cluster: one sequence for a still,
    an animated image or a video (faces/media/), opened from the upload's bytes; each stage gets what the one
    before returned. The try's context (jobqueue/context.py) gives the engine and the checkpoint, called between
    tiles and frames, and before the uploads.
    """
    upload = media.open(read_object(photo.upload_key)) if upload is None else upload
    size = (upload.width, upload.height)
    if photo.faces_detected_at is None:
        faces = detect_and_store(photo, upload, ctx.resources[FACE_ENGINE], ctx.checkpoint)
        match = match_faces(photo, size, faces)
    else:
        match = match_faces(photo, size)
    return publish_path(photo, upload, match, ctx.checkpoint)


def publish_path(photo: Photo, upload: Media, match: PhotoMatch | None, checkpoint: Checkpoint) -> dict:
    """Render and publish the upload's files from `match`, then cluster.

    Clustering comes last: it holds its event's lock until the commit (docs/ARCHITECTURE.md §6), and
    nothing before it depends on the clusters.
    """
    files = render_and_publish(photo, upload, match, checkpoint)
    name_and_cluster(match)
    _sweep_when_committed(photo)
    return {"faces": len(match.faces) if match else 0, "files": files, **_rendered_because(upload)}


def _rendered_because(upload: Media) -> dict:
    """For the job's log line: why a still's public file is rendered rather than its upload (a clip's: no line)."""
    why = upload.why_rendered
    return {"rendered_because": "; ".join(why)} if why else {}


def locked_photo(photo_id) -> Photo:
    photo = Photo.objects.select_for_update().filter(id=photo_id).first()
    if photo is None:
        raise RowGone(f"photo {photo_id} does not exist")
    return photo


def has_active_dnp_member(event_id) -> bool:
    return EventMember.objects.filter(event_id=event_id, status=EventMember.Status.ACTIVE, do_not_publish=True).exists()


def _sweep_when_committed(photo: Photo) -> None:
    transaction.on_commit(lambda: sweep_after_commit(photo.event_id, photo.id))
