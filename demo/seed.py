"""The demo's event, written the way the API would write it (docs/ARCHITECTURE.md §3).

One event: the group photo `t1.jpg` (six faces) with a blur region in its
lower-left corner, and Tom Hanks's portrait as a second photo. One attendee of the
group photo chose Do Not Publish; their reference is a different image of their
face (`samples.derived_portrait`), never a crop of the upload itself. Everyone else
is an ordinary member.
"""

import json
import uuid
from dataclasses import dataclass, field

import numpy as np
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection

from faces.engines import resident_engine
from faces.models import Event, EventMember, Photo, SubjectReference
from faces.rendering.codec import encode_jpeg, thumbnail
from jobqueue import queries
from momentlens.devservices import samples

# Which of t1's faces (sorted by box x) chose Do Not Publish. Measured with buffalo_s,
# reference and photo both through JPEG: face 2's reference reaches 0.97 on face 2
# and at most 0.04 on anyone else (t1's other five faces, Tom Hanks), far under the
# blur threshold 0.30.
DNP_FACE_INDEX = 2
# Lower-left corner of the group photo, clear of every face (fractions).
GROUP_BLUR_REGION = {"x": 0.02, "y": 0.75, "w": 0.2, "h": 0.2}


@dataclass
class DemoPhoto:
    name: str
    photo: Photo


@dataclass
class DemoEvent:
    event: Event
    dnp_user: uuid.UUID
    reference: SubjectReference
    ordinary_members: list[uuid.UUID]
    photos: list[DemoPhoto] = field(default_factory=list)
    sent: list[dict] = field(default_factory=list)


def seed_event() -> DemoEvent:
    """Rows and uploads of the demo event; the jobs are sent by `send_reference_jobs` / `send_photo_jobs`."""
    group = samples.group_photo()
    faces = sorted(resident_engine().analyze(group), key=lambda face: face.box[0])
    if len(faces) <= DNP_FACE_INDEX:
        raise RuntimeError(f"the engine found {len(faces)} faces in t1.jpg; the demo needs face {DNP_FACE_INDEX}")

    event = Event.objects.create(name="Team offsite (demo)")
    dnp_user = add_member(event, dnp=True)
    # The other attendees of the group photo, and the person in the second photo.
    ordinary = [add_member(event) for _ in range(len(faces) - 1)] + [add_member(event)]
    reference = upload_reference(dnp_user, samples.derived_portrait(group, faces[DNP_FACE_INDEX].box))
    seeded = DemoEvent(event=event, dnp_user=dnp_user, reference=reference, ordinary_members=ordinary)
    seeded.photos = [
        DemoPhoto("t1.jpg (group)", upload_photo(event, group, uploader=ordinary[0], blur_regions=[GROUP_BLUR_REGION])),
        DemoPhoto("Tom_Hanks_54745.png (portrait)", upload_photo(event, samples.tom_hanks(), uploader=ordinary[-1])),
    ]
    return seeded


def add_member(event: Event, *, dnp: bool = False) -> uuid.UUID:
    user_id = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user_id, do_not_publish=dnp)
    return user_id


def upload_reference(user_id: uuid.UUID, image: np.ndarray) -> SubjectReference:
    reference_id = uuid.uuid4()
    key = put(f"users/{user_id}/references/{reference_id}.jpg", samples.encode_jpeg(image))
    return SubjectReference.objects.create(id=reference_id, user_id=user_id, upload_key=key)


def upload_photo(event: Event, image: np.ndarray, *, uploader: uuid.UUID, blur_regions=()) -> Photo:
    photo_id = uuid.uuid4()
    key = put(f"events/{event.id}/uploads/{photo_id}.jpg", samples.encode_jpeg(image))
    thumb_key = put(f"events/{event.id}/uploads/{photo_id}_thumb.jpg", encode_jpeg(thumbnail(image)))
    return Photo.objects.create(
        id=photo_id,
        event=event,
        uploader_id=uploader,
        upload_key=key,
        upload_thumb_key=thumb_key,
        blur_regions=list(blur_regions),
    )


def put(key: str, data: bytes) -> str:
    saved = default_storage.save(key, ContentFile(data))
    if saved != key:
        raise RuntimeError(f"storage wrote {saved} instead of {key}")
    return key


def send_reference_jobs(seeded: DemoEvent) -> None:
    send(seeded, {"job": "reference_process", "reference_id": str(seeded.reference.id)})


def send_photo_jobs(seeded: DemoEvent) -> None:
    for demo_photo in seeded.photos:
        send(seeded, {"job": "face_process", "photo_id": str(demo_photo.photo.id)})


def send(seeded: DemoEvent, payload: dict) -> int:
    with connection.cursor() as cursor:
        msg_id = queries.send(cursor, json.dumps(payload))
    seeded.sent.append({"msg_id": msg_id, **payload})
    return msg_id
