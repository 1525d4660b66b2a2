"""Rows and uploads the tests need, written the way the API would write them."""

import uuid

import cv2
import numpy as np
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from faces import media
from faces.models import Event, EventMember, Face, Photo, SubjectReference
from momentlens.devservices.samples import derived_portrait, encode_jpeg, recolour
from tests.support.queue_helpers import send

# What the API stores as a photo's own thumbnail: never read by the worker, never published.
API_THUMBNAIL = b"thumbnail written by the API"


def event(name: str = "Wedding") -> Event:
    return Event.objects.create(name=name)


def member(event: Event, *, dnp: bool = False, status: str = "active", user_id=None) -> uuid.UUID:
    user_id = user_id or uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user_id, do_not_publish=dnp, status=status)
    return user_id


def upload(key: str, image: np.ndarray | None = None, data: bytes | None = None) -> str:
    default_storage.save(key, ContentFile(data if data is not None else encode_jpeg(image)))
    return key


def still_of(image: np.ndarray) -> media.Still:
    """A picture the test made, as the worker opens an upload of it: a PNG, so its pixels are exactly these."""
    return media.open(cv2.imencode(".png", image)[1].tobytes())


def photo_row(event: Event, photo_id: uuid.UUID | None = None, **fields) -> Photo:
    """The row alone, with the API's upload keys; nothing in storage."""
    photo_id = photo_id or uuid.uuid4()
    uploads = {
        "upload_key": f"events/{event.id}/uploads/{photo_id}.jpg",
        "upload_thumb_key": f"events/{event.id}/uploads/{photo_id}_thumb.jpg",
    }
    return Photo.objects.create(id=photo_id, event=event, uploader_id=uuid.uuid4(), **{**uploads, **fields})


def face_row(photo: Photo, embedding: list[float], **fields) -> Face:
    """A stored face of `photo` (a small box near the top left) with `embedding`; nothing detected."""
    return Face.objects.create(
        photo=photo,
        event_id=photo.event_id,
        box_x=0.1,
        box_y=0.2,
        box_w=0.05,
        box_h=0.07,
        landmarks=[[0.11, 0.22], [0.13, 0.22], [0.12, 0.24], [0.11, 0.26], [0.13, 0.26]],
        det_score=0.98,
        embedding=embedding,
        engine="insightface-buffalo_s",
        **fields,
    )


def rendered_photo_rows(event: Event, count: int) -> list[Photo]:
    """`count` rows of photos rendered and published before (version 1), in one insert; nothing in storage."""
    now = timezone.now()
    rows = []
    for _ in range(count):
        photo_id = uuid.uuid4()
        rows.append(
            Photo(
                id=photo_id,
                event=event,
                uploader_id=uuid.uuid4(),
                upload_key=f"events/{event.id}/uploads/{photo_id}.jpg",
                upload_thumb_key=f"events/{event.id}/uploads/{photo_id}_thumb.jpg",
                variant_version=1,
                processed_at=now,
            )
        )
    return Photo.objects.bulk_create(rows)


def photo(event: Event, image: np.ndarray | None = None, *, data: bytes | None = None, **fields) -> Photo:
    """The row and its upload objects, as the API leaves them before it enqueues a job."""
    photo_id = uuid.uuid4()
    upload(f"events/{event.id}/uploads/{photo_id}.jpg", image, data)
    upload(f"events/{event.id}/uploads/{photo_id}_thumb.jpg", data=API_THUMBNAIL)
    return photo_row(event, photo_id, **fields)


def reference(user_id: uuid.UUID, image: np.ndarray | None = None, *, data: bytes | None = None) -> SubjectReference:
    reference_id = uuid.uuid4()
    key = upload(f"users/{user_id}/references/{reference_id}.jpg", image, data)
    return SubjectReference.objects.create(id=reference_id, user_id=user_id, upload_key=key)


def pair_selfie(group: np.ndarray, left, right) -> np.ndarray:
    """A selfie of two neighbours of t1 (`group`), side by side at the same size: neither face dominates, so its
    reference_process records `many_faces` and keeps both faces as candidates."""
    x1, y1 = (int(min(a, b)) for a, b in zip(left.box[:2], right.box[:2], strict=True))
    x2, y2 = (int(max(a, b)) for a, b in zip(left.box[2:], right.box[2:], strict=True))
    margin = (x2 - x1) // 10
    crop = group[max(0, y1 - 2 * margin) : y2 + 2 * margin, max(0, x1 - margin) : x2 + margin]
    return recolour(cv2.resize(crop, None, fx=1.6, fy=1.6), hue_shift=6, gain=1.1)


def beside_the_frame(group: np.ndarray, subject, neighbour, *, neighbour_shown: float = 0.6) -> np.ndarray:
    """A selfie of `subject` (a face of t1, `group`) framed whole, with `neighbour`, the guest to their right, cut by
    the right edge so that `neighbour_shown` of their face's width is in the picture: still comparably large (t1's
    third and fourth guests at 0.6: 57 px against 107 wide, over half the subject's area)."""
    x1 = int(subject.box[0] - 0.6 * (subject.box[2] - subject.box[0]))
    y1 = int(min(subject.box[1], neighbour.box[1]) - 60)
    y2 = int(max(subject.box[3], neighbour.box[3]) + 40)
    x2 = int(neighbour.box[0] + neighbour_shown * (neighbour.box[2] - neighbour.box[0]))
    return np.ascontiguousarray(group[max(0, y1) : y2, max(0, x1) : x2])


def in_the_dark_behind(selfie: np.ndarray, box) -> np.ndarray:
    """`selfie` with the face at `box` as a dim, out-of-focus guest behind the subject: a sixth of the light
    blurred and with sensor noise, still found at its size but too poorly seen for the recogniser to judge
    (embedding norm 14.7 once uploaded as a JPEG: under an unsure_norm of 15, which its test sets)."""
    x1, y1, x2, y2 = (int(v) for v in box)
    reach = (x2 - x1) // 4
    dimmed = selfie.copy()
    region = dimmed[max(0, y1 - reach) : y2 + reach, max(0, x1 - reach) : x2 + reach]
    noise = np.random.default_rng(0).normal(0, 2, region.shape)
    region[:] = np.clip(cv2.GaussianBlur(region, (0, 0), 4) * 0.1 + noise, 0, 255).astype(np.uint8)
    return dimmed


def member_with_reference(event: Event, group: np.ndarray, face, *, dnp: bool = True, **fields) -> uuid.UUID:
    """A member whose reference is derived from their `face` in t1 (`group`), its reference_process job sent."""
    user_id = member(event, dnp=dnp, **fields)
    sent = reference(user_id, derived_portrait(group, face.box))
    send({"job": "reference_process", "reference_id": str(sent.id)})
    return user_id


def ready_reference(user_id: uuid.UUID, embedding, engine: str) -> SubjectReference:
    return SubjectReference.objects.create(
        user_id=user_id,
        upload_key=f"users/{user_id}/references/{uuid.uuid4()}.jpg",
        status=SubjectReference.Status.READY,
        embedding=embedding,
        engine=engine,
    )
