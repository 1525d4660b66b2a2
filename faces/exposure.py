"""Hide first (docs/ARCHITECTURE.md §5): a change that tightens privacy unpublishes, in its own transaction,
every published photo of the event whose files would now show a face they must blur.

A DNP member turned on, a DNP member who joins, a DNP member's reference that becomes `ready`: the photos
that show them are public, unblurred, until each is rendered again, and their renders wait in the queue.
So the job that learns of the change looks first, from the stored embeddings: pgvector finds the published
photos with a face within reach of a DNP member's reference (at the lowest blur threshold, that of a
poorly seen face), and those with a face at the image's edge or seen too poorly to judge (the unsure
rules); each of them is matched as
a render would match it (faces.people.PhotoMatch, size-aware thresholds, tracks as bags), and a photo
whose files would blur a face, or a region, that its current files do not (photos.render_plan) is
unpublished at once. Its render, sent first (`jobqueue.enqueue.enqueue_unless_waiting(first=True)`),
publishes it again. A false hide only delays a photo by one render; a missed one is a published face, so
wherever the worker cannot tell (thresholds not measured, a DNP member with no usable reference), every
published photo with a face is a candidate, and its render plan decides; and a published photo that no face
pass has looked at (thumbnail_dims published it while nobody was DNP) is hidden, its render detecting first.
"""

import json
import uuid
from dataclasses import dataclass

import numpy as np
from django.db import connection

from faces import queries, thresholds
from faces.geometry import EDGE_CUTS
from faces.models import EventMember, Face, Photo
from faces.people import Candidates, PhotoMatch
from faces.publication import plan_of, unpublish


def hide_exposed(event_id) -> list[uuid.UUID]:
    """Unpublish (in this transaction) the event's published photos whose files show less blur than the
    event's members now need; returns their ids, oldest first. Each is locked first: a photo job in flight
    on one of them is waited for, and what it publishes is judged.

    Its cost grows with the event's published photos, never with what is in flight: one query for the
    candidates, one to lock them, one for their faces, the members and references once per engine, then
    every candidate matched in memory (`bench/exposure.py --hide-photos 5000`)."""
    dnp = list(EventMember.objects.dnp().filter(event_id=event_id).values_list("user_id", flat=True))
    if not dnp:
        return []
    engines = _engines(event_id)
    candidates = {photo_id for engine in engines for photo_id in _candidates(event_id, engine, dnp)}
    candidates |= set(_never_looked_at(event_id))
    photos = list(Photo.objects.select_for_update().filter(id__in=candidates).order_by("created_at", "id"))
    faces = _faces_of([photo.id for photo in photos if photo.processed_at is not None])
    members = {engine: Candidates.for_event(event_id, engine) for engine in engines}
    exposed = [photo.id for photo in photos if _exposed(photo, faces, members)]
    unpublish(Photo.objects.filter(id__in=exposed))
    return exposed


def _exposed(photo: Photo, faces: dict, members: dict) -> bool:
    """Whether a candidate (locked, read again) shows less blur than its files must now: a published photo that no
    face pass has looked at (thumbnail_dims published it while the event had no DNP member) may show anyone."""
    if photo.processed_at is None:
        return False
    if photo.faces_detected_at is None:
        return True
    return photo.id in faces and shows_less_blur(photo, faces[photo.id], members)


def _never_looked_at(event_id) -> list:
    """The event's published photos without a face pass: no stored face can say whom they show."""
    published = Photo.objects.filter(event_id=event_id, processed_at__isnull=False, faces_detected_at__isnull=True)
    return list(published.values_list("id", flat=True))


def shows_less_blur(photo: Photo, faces: list | None = None, members: dict | None = None) -> bool:
    """Whether a render now would blur, in some file, a face or region the current file does not. A DNP
    member's own file that would no longer be written is held to the public file's blur. `faces` (the
    photo's, by id) and `members` (the event's candidates per engine) when the caller has read them."""
    size = photo.shown_size  # unknown: every face unsure
    faces = list(photo.faces.order_by("id")) if faces is None else faces
    engine = faces[0].engine if faces else None
    known = (members or {}).get(engine)
    match = PhotoMatch.for_faces(faces, photo.event_id, engine, size, known) if faces else None
    now = plan_of(photo, match)
    rendered = photo.render_plan or {"regions": [], "public": []}
    if _regions_added(rendered.get("regions", []), now["regions"]):
        return True
    for viewer, blurred in rendered.items():
        if viewer != "regions" and set(now.get(viewer, now["public"])) - set(blurred):
            return True
    return False


def _faces_of(photo_ids: list) -> dict:
    """The faces of these photos, by photo, each photo's by id (as its render matched them)."""
    faces: dict = {}
    with connection.cursor() as cursor:
        cursor.execute(queries.FACES_OF_PHOTOS, [photo_ids])
        for row in cursor.fetchall():
            face = _face(row)
            faces.setdefault(face.photo_id, []).append(face)
    return faces


@dataclass(frozen=True, slots=True)
class StoredFace:
    """What matching reads of a face row (faces.models.Face's names), built without the ORM: a big event has tens of
    thousands."""

    id: uuid.UUID
    photo_id: uuid.UUID
    box_x: float
    box_y: float
    box_w: float
    box_h: float
    landmarks: list
    embedding: np.ndarray
    engine: str
    track: int | None
    embedding_norm: float | None


def _face(row) -> StoredFace:
    face_id, photo_id, box_x, box_y, box_w, box_h, landmarks, embedding, engine, track, norm = row
    vector = np.frombuffer(bytes(embedding), dtype=">f4", offset=4).astype(np.float32)
    landmarks = json.loads(landmarks) if isinstance(landmarks, str) else landmarks
    return StoredFace(face_id, photo_id, box_x, box_y, box_w, box_h, landmarks, vector, engine, track, norm)


def _regions_added(before: list, now: list) -> bool:
    return any(region not in before for region in now)


def _engines(event_id) -> list[str]:
    return list(Face.objects.filter(event_id=event_id).values_list("engine", flat=True).distinct())


def _candidates(event_id, engine: str, dnp: list) -> list:
    engine_thresholds = thresholds.for_engine(engine)
    candidates = Candidates.for_event(event_id, engine)
    lowest = engine_thresholds.lowest_blur
    with connection.cursor() as cursor:
        if lowest is None or candidates.unidentifiable_dnp:
            # Not measured, or a DNP member nobody can recognise: every face may be theirs.
            cursor.execute(queries.PHOTOS_WITH_FACES, [event_id, engine])
        else:
            # A reference's bar moves (faces/population.py): reach down to the lowest of theirs.
            reach = lowest + candidates.lowest_shift(dnp)
            parameters = [event_id, engine, EDGE_CUTS.near_border, engine_thresholds.unsure_norm, dnp, 1.0 - reach]
            cursor.execute(queries.CANDIDATE_PHOTOS, parameters)
        return [row[0] for row in cursor.fetchall()]
