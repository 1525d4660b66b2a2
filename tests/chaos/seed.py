"""What a chaos run puts in the database, the bucket and the queue, as the API would leave them; and the truth
the invariants hold the workers' files to."""

import hashlib
import random
import uuid
from dataclasses import dataclass, field

import cv2
import numpy as np

from tests.chaos.edge_cuts import EdgeCut, edge_cut
from tests.chaos.queue import send
from tests.chaos.services import Services
from tests.chaos.uploads import MediaUpload, media_uploads, refused_media, still_uploads

# Messages no worker can do anything with: archived with their reason, never retried forever.
MALFORMED = ("a string, not an object", [1, 2, 3])
# Clips whose job is sent again after it: reprocess reads the stored tracks.
REPROCESSED_CLIPS = ("animated WebP, DNP", "MP4 30 fps")


@dataclass
class DnpChange:
    """A member with a ready reference, seen in the event's photos, who turns on Do Not Publish mid-run (the
    API's update and reprocess_event), and what the photos of the event looked like from then on."""

    event_id: str
    user_id: uuid.UUID
    reference_id: str
    msg_id: int | None = None
    sent_at: float | None = None  # epoch seconds
    # (epoch seconds, {photo id: the face ids its public file blurs, or None when it is not published})
    samples: list = field(default_factory=list)


@dataclass
class Seeded:
    """What the seed made: the jobs it sent, each upload's digest, and what it knows of the special uploads."""

    jobs: int = 0
    upload_hashes: dict[str, str] = field(default_factory=dict)
    # Photos whose upload is an animation or a video, by id: rendered into files of its kind. Those refused
    # (beyond a limit, undecodable, pages): photo id -> name; never rendered.
    media_photos: dict[str, MediaUpload] = field(default_factory=dict)
    refused_media: dict[str, str] = field(default_factory=dict)
    edge_cuts: list[EdgeCut] = field(default_factory=list)
    # Stills whose bytes hold more than one plain picture, or show it turned, by photo id: their public file
    # is always rendered (faces/media/still.py), and no picture in any published file shows a DNP face.
    rendered_stills: dict[str, str] = field(default_factory=dict)
    # The member who turns on Do Not Publish halfway through the faults (faults.change_dnp).
    dnp_change: DnpChange | None = None


@dataclass
class Seeding:
    """The seed while it runs: t1 (the group photo) and its faces left to right, the messages to send, and
    per event the DNP members' faces (index in t1's faces -> member)."""

    rng: random.Random
    group: np.ndarray
    group_faces: list
    pictures: list  # what an ordinary photo shows (sample_pictures)
    seeded: Seeded = field(default_factory=Seeded)
    messages: list = field(default_factory=list)
    dnp_faces: dict = field(default_factory=dict)

    def remember(self, key: str, data: bytes) -> None:
        """An upload's digest: the invariants hold it to these bytes at the end."""
        self.seeded.upload_hashes[key] = hashlib.sha256(data).hexdigest()

    def photo(self, event, data: bytes | None, regions=()):
        """A photo row and its upload (none when `data` is None), as the API leaves them."""
        from tests.support import factories

        if data is None:
            return factories.photo_row(event, blur_regions=list(regions))
        photo = factories.photo(event, data=data, blur_regions=list(regions))
        self.remember(photo.upload_key, data)
        self.remember(photo.upload_thumb_key, factories.API_THUMBNAIL)
        return photo

    def job(self, job: str, photo) -> None:
        self.messages.append({"job": job, "photo_id": str(photo.id)})

    def reference(self, user: uuid.UUID, face_index: int) -> str:
        """A ready-to-process reference of t1's face `face_index` for `user`; its job is queued."""
        from momentlens.devservices import samples
        from tests.support import factories

        data = samples.encode_jpeg(samples.derived_portrait(self.group, self.group_faces[face_index].box))
        reference = factories.reference(user, data=data)
        self.remember(reference.upload_key, data)
        self.messages.append({"job": "reference_process", "reference_id": str(reference.id)})
        return str(reference.id)


def seed(services: Services, rng: random.Random, events: int, photos_per_event: int) -> Seeded:
    """Events, members, references, photos and the queue, as the API would leave them."""
    from faces.engines import resident_engine
    from faces.models import Event
    from momentlens.devservices import samples

    group = samples.group_photo()
    faces = sorted(resident_engine().analyze(group), key=lambda face: face.box[0])
    seeding = Seeding(rng, group, faces, sample_pictures(group))
    photos = [photo for number in range(events) for photo in seed_event(seeding, number, photos_per_event)]
    made = list(Event.objects.all())
    plain, hostile = made[0], made[-1]
    seed_late_dnp_member(seeding, hostile)
    seed_hostile_uploads(seeding, plain, hostile)
    seed_hostile_messages(seeding, photos[0])
    seed_sent_again(seeding, photos)
    seeding.messages += [{"job": "reprocess_event", "event_id": str(event.id)} for event in made]
    with services.db() as conn:
        for message in seeding.messages:
            send(conn, message)
    seeding.seeded.jobs = len(seeding.messages)
    return seeding.seeded


def seed_event(seeding: Seeding, number: int, photos: int) -> list:
    """An event with two ordinary members, two DNP members with references (none in event 0: thumbnail_dims
    publishes without a face pass there), and its photos."""
    from tests.support import factories

    event = factories.event(f"chaos event {number}")
    seeding.dnp_faces[event.id] = {}
    for _ in range(2):
        factories.member(event)
    if number > 0:
        for face_index in seeding.rng.sample(range(len(seeding.group_faces)), 2):
            user = factories.member(event, dnp=True)
            seeding.dnp_faces[event.id][face_index] = user
            seeding.reference(user, face_index)
    return [seed_event_photo(seeding, event, number, index) for index in range(photos)]


def seed_event_photo(seeding: Seeding, event, number: int, index: int):
    """A photo of t1 (recoloured, or another sample), some with a blur region; in an event with DNP members,
    its first photo and about a third of the rest cut a face with the edge."""
    from momentlens.devservices import samples

    rng, dnp = seeding.rng, seeding.dnp_faces[event.id]
    regions = [{"x": 0.02, "y": 0.8, "w": 0.15, "h": 0.15}] if rng.random() < 0.3 else []
    cut = dnp and (index == 0 or rng.random() < 0.3)
    if cut:
        picture, size, cut_faces = edge_cut(rng, seeding.group, seeding.group_faces, dnp)
    else:
        picture = rng.choice(seeding.pictures)
    photo = seeding.photo(event, samples.encode_jpeg(picture), regions)
    if cut:
        seeding.seeded.edge_cuts += [
            EdgeCut(str(photo.id), dnp[face_index], face_index, side, box, size)
            for face_index, side, box in cut_faces
            if face_index in dnp
        ]
    seeding.job("thumbnail_dims" if number == 0 or rng.random() < 0.2 else "face_process", photo)
    return photo


def sample_pictures(group: np.ndarray) -> list[np.ndarray]:
    """What an ordinary photo shows: t1 or t1 recoloured most often, else a portrait, a person, or no one."""
    from momentlens.devservices import samples

    recoloured = cv2.resize(samples.recolour(group, hue_shift=5, gain=1.05), None, fx=0.85, fy=0.85)
    others = [samples.tom_hanks(), samples.astronaut(), samples.face_free_scenes()[0]]
    return [group, recoloured] * 3 + others


def seed_late_dnp_member(seeding: Seeding, event) -> None:
    """A member who is no DNP member yet, with a reference of a t1 face no DNP member has: the t1 photos of the
    event show them. Turned on halfway through the faults (faults.change_dnp)."""
    from tests.support import factories

    dnp = seeding.dnp_faces[event.id]
    face = next(index for index in range(len(seeding.group_faces)) if index not in dnp)
    user = factories.member(event)
    seeding.seeded.dnp_change = DnpChange(str(event.id), user, seeding.reference(user, face))


def seed_hostile_uploads(seeding: Seeding, plain, hostile) -> None:
    """Broken images, stills with more than one picture in their bytes, a missing upload, clips, refused clips."""
    for data in bad_uploads(seeding.rng, seeding.group).values():
        seeding.job("face_process", seeding.photo(hostile, data))
    dnp = seeding.dnp_faces[hostile.id]
    for name, data, job, event in still_uploads(seeding.group, seeding.group_faces, plain, hostile, dnp):
        still = seeding.photo(event, data)
        seeding.seeded.rendered_stills[str(still.id)] = name
        seeding.job(job, still)
    seeding.job("face_process", seeding.photo(hostile, None))
    for upload, data, job, event, regions in media_uploads(seeding.group, seeding.group_faces, plain, hostile, dnp):
        clip = seeding.photo(event, data, regions)
        seeding.seeded.media_photos[str(clip.id)] = upload
        seeding.job(job, clip)
        if upload.name.startswith(REPROCESSED_CLIPS):
            seeding.job("reprocess", clip)
    for name, data in refused_media(seeding.group).items():
        refused = seeding.photo(hostile, data)
        seeding.seeded.refused_media[str(refused.id)] = name
        seeding.job("face_process", refused)


def bad_uploads(rng: random.Random, group: np.ndarray) -> dict[str, bytes]:
    from momentlens.devservices import samples

    return {
        "corrupt": b"\xff\xd8\xff\xe0" + bytes(rng.randrange(256) for _ in range(4000)),
        "truncated": samples.encode_jpeg(group)[:30000],
        "zero-byte": b"",
        "bomb": samples.png_promising(20_000, 20_000),
        "huge": samples.jpeg_promising(samples.tom_hanks(), 15_000, 12_000),
    }


def seed_hostile_messages(seeding: Seeding, photo) -> None:
    """Malformed messages, an unknown job, and jobs naming rows that do not exist."""
    seeding.messages += [
        *MALFORMED,
        {"photo_id": str(uuid.uuid4())},
        {"job": "no_such_job", "photo_id": str(photo.id)},
        {"job": "face_process", "photo_id": "not-a-uuid"},
        {"job": "face_process", "photo_id": str(uuid.uuid4())},
        {"job": "reprocess_event", "event_id": str(uuid.uuid4())},
        {"job": "reference_process", "reference_id": str(uuid.uuid4())},
    ]


def seed_sent_again(seeding: Seeding, photos: list) -> None:
    """A fifth of the photos reprocessed, a tenth sent thumbnail_dims again after their face job."""
    for picked in seeding.rng.sample(photos, max(1, len(photos) // 5)):
        seeding.job("reprocess", picked)
    for picked in seeding.rng.sample(photos, max(1, len(photos) // 10)):
        seeding.job("thumbnail_dims", picked)
