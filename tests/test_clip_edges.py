"""Clips at their edges, end to end (run_worker --drain, real PostgreSQL, SeaweedFS S3, buffalo_s): a hard cut
between two people, an APNG whose default image is not part of its animation, a GIF of 0 ms frames, an MKV
whose timestamps go backwards and repeat (docs/ARCHITECTURE.md §11)."""

import io
from fractions import Fraction

import av
import cv2
import numpy as np
import pytest
from PIL import Image

from faces.geometry import iou
from faces.models import Photo
from tests.support import factories
from tests.support.face_readings import read_face
from tests.support.media_clips import Box, background, guest, paste, read_animation, read_video, tiles
from tests.support.publishing_helpers import run_worker_drain
from tests.support.queue_helpers import archived, queue_rows, send
from tests.support.stored_files import read_bytes
from tests.support.video_samples import encode

pytestmark = pytest.mark.usefixtures("live_db", "s3_media_storage", "fast_retries", "test_thresholds")

DNP, OTHER = 0, 3  # t1's leftmost guest (the DNP member) and a guest who is a member without DNP


def face_processed(event, data: bytes) -> Photo:
    photo = factories.photo(event, data=data)
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()
    assert queue_rows() == []
    assert archived() == {}, "completed: neither refused nor failed"
    photo.refresh_from_db()
    assert photo.processed_at is not None
    return photo


def pixel_box(face, width: int, height: int) -> Box:
    return (face.box_x * width, face.box_y * height, (face.box_x + face.box_w) * width,
            (face.box_y + face.box_h) * height)  # fmt: skip


# ---------------------------------------------------------------- one person per track


def hard_cut(group, group_faces, *, frames_each: int = 43, width: int = 1024, height: int = 576):
    """A member (OTHER) on the left of one wall, then, cut to another wall of the same tiles, the DNP guest
    five face widths to the right; each face about 120 px wide. Returns (data, cut time, the two scripts)."""
    face_px = 120
    people = {}
    for index in (OTHER, DNP):
        box = group_faces[index].box
        people[index] = guest(group, box, face_px / float(box[2] - box[0]))
    frames, times, script = [], [], []
    for i in range(2 * frames_each):
        first = i < frames_each
        canvas = tiles(width, height, seed=1 if first else 2)
        who = people[OTHER if first else DNP]
        x = 40 if first else 40 + 5 * face_px
        script.append((OTHER if first else DNP, paste(canvas, who, x, 120)))
        frames.append(canvas)
        times.append(i / 30)
    return encode(frames, times), frames_each / 30, script


def test_the_motion_watch_sees_a_cut_between_two_walls_of_the_same_tiles():
    from faces.detection import clips

    before, after = tiles(640, 360, seed=1), tiles(640, 360, seed=2)
    assert abs(float(before.mean()) - float(after.mean())) < 2.0, "alike in brightness"
    brighter = cv2.convertScaleAbs(before, alpha=1.0, beta=30)
    frames = [before, before, brighter, before, after]
    cut = [change.cut for _, _, change in clips.changes(enumerate(frames))]
    assert not cut[1], "the same picture"
    assert not cut[2], "a flash lights the same wall: no cut"
    assert cut[4], "another layout of the same tiles: a cut"


def test_a_hard_cut_between_two_people_gives_each_their_own_track(group, group_faces):
    event = factories.event()
    dnp_user = factories.member_with_reference(event, group, group_faces[DNP])
    other_user = factories.member_with_reference(event, group, group_faces[OTHER], dnp=False)
    run_worker_drain()
    data, cut_at, script = hard_cut(group, group_faces)
    photo = face_processed(event, data)

    faces = list(photo.faces.order_by("frame_time"))
    assert faces
    tracks_before = {face.track for face in faces if face.frame_time < cut_at - 1e-3}
    tracks_after = {face.track for face in faces if face.frame_time >= cut_at - 1e-3}
    assert tracks_before.isdisjoint(tracks_after), "no track goes on across the cut"
    problems = []
    for face in faces:
        frame = min(round(face.frame_time * 30), len(script) - 1)
        who, box = script[frame]
        expected = dnp_user if who == DNP else other_user
        if iou(pixel_box(face, photo.width, photo.height), box) < 0.5:
            problems.append(f"{face.frame_time:.3f}s: a face row where nobody is")
        elif face.matched_user_id != expected:
            problems.append(f"{face.frame_time:.3f}s: stored as {face.matched_user_id}, not {expected}")
    assert not problems, "\n".join(problems)
    by_track = {}
    for face in faces:
        by_track.setdefault(face.track, set()).add(face.matched_user_id)
    assert all(len(users) == 1 for users in by_track.values()), f"a track holds two people: {by_track}"
    assert [variant.user_id for variant in photo.variants.all()] == [dnp_user], "the DNP guest's own file"

    upload, public = read_video(read_bytes(photo.upload_key)), read_video(read_bytes(photo.public_key))
    for index, (who, box) in enumerate(script):
        reading = read_face(public.frames[index], upload.frames[index], box)
        if who == DNP:
            assert reading.blurred, f"frame {index}: the DNP guest is visible: {reading}"
        else:
            assert reading.intact, f"frame {index}: the other member is blurred: {reading}"


# ---------------------------------------------------------------- every valid animation opened


def apng_with_a_default_image(group, group_faces) -> tuple[bytes, Box]:
    """An APNG whose default image (the DNP guest) is not part of its animation (three frames of the wall)."""
    width, height = 480, 320
    box = group_faces[DNP].box
    dnp = guest(group, box, 110 / float(box[2] - box[0]))
    default = background(width, height)
    where = paste(default, dnp, 150, 60)
    animation = [background(width, height) for _ in range(3)]
    for shade, frame in zip((0, 30, 60), animation, strict=True):
        frame[-40:, :] = shade
    pictures = [Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)) for frame in (default, *animation)]
    out = io.BytesIO()
    pictures[0].save(out, "PNG", save_all=True, append_images=pictures[1:], default_image=True, duration=100, loop=0)
    return out.getvalue(), where


def test_an_apng_with_a_separate_default_image_is_published_with_that_image_blurred(group, group_faces):
    data, where = apng_with_a_default_image(group, group_faces)
    with Image.open(io.BytesIO(data)) as image:
        assert image.info.get("default_image"), "the default image is not part of the animation"
    event = factories.event()
    factories.member_with_reference(event, group, group_faces[DNP])
    run_worker_drain()
    photo = face_processed(event, data)

    upload, public = read_animation(data), read_animation(read_bytes(photo.public_key))
    assert len(public.frames) == len(upload.frames) == 4, "the default image, then the animation"
    assert all(duration > 0 for duration in public.durations_ms)
    assert read_face(public.frames[0], upload.frames[0], where).blurred, "the default image's DNP face"
    poster = cv2.imdecode(np.frombuffer(read_bytes(photo.public_thumb_key), np.uint8), cv2.IMREAD_COLOR)
    scaled = cv2.resize(public.frames[0], (poster.shape[1], poster.shape[0]), interpolation=cv2.INTER_AREA)
    assert float(np.abs(scaled.astype(int) - poster.astype(int)).mean()) < 8.0, "the poster: the blurred image"


def test_a_gif_of_zero_millisecond_frames_plays_as_a_browser_plays_it(group, group_faces):
    """Browsers show a frame of 10 ms or less for 100 ms: so does the worker, and each frame keeps its own time."""
    box = group_faces[DNP].box
    dnp = guest(group, box, 100 / float(box[2] - box[0]))
    frames = []
    for x in (40, 60, 80, 100):
        frame = background(400, 300)
        paste(frame, dnp, x, 50)
        frames.append(Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)))
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=0, loop=0)
    event = factories.event()
    dnp_user = factories.member_with_reference(event, group, group_faces[DNP])
    run_worker_drain()
    photo = face_processed(event, out.getvalue())

    assert photo.duration_ms == 400
    assert read_animation(read_bytes(photo.public_key)).durations_ms == [100] * 4
    times = sorted({face.frame_time for face in photo.faces.filter(matched_user_id=dnp_user)})
    assert times == pytest.approx([0.0, 0.1, 0.2, 0.3]), "the DNP guest seen, and matched, in each frame"


# ---------------------------------------------------------------- one clock


def mkv_with_stamps_going_back(group, group_faces, stamps_ms: list[int]) -> bytes:
    """An MJPEG Matroska file whose frames carry `stamps_ms` as they are (backwards, repeated): the DNP
    guest in every frame."""
    box = group_faces[DNP].box
    dnp = guest(group, box, 100 / float(box[2] - box[0]))
    out = io.BytesIO()
    with av.open(out, "w", format="matroska") as container:
        stream = container.add_stream("mjpeg", rate=30)
        stream.width, stream.height, stream.pix_fmt = 480, 320, "yuvj420p"
        stream.time_base = Fraction(1, 1000)
        # The muxer wants decode stamps that never go back: each frame's is the least stamp from it on.
        floors = [min(stamps_ms[i:]) for i in range(len(stamps_ms))]
        for i, (stamp, floor) in enumerate(zip(stamps_ms, floors, strict=True)):
            canvas = background(480, 320)
            paste(canvas, dnp, 60 + i, 60)
            for packet in stream.encode(av.VideoFrame.from_ndarray(canvas, format="bgr24")):
                packet.pts, packet.dts, packet.time_base = stamp, floor, stream.time_base
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def test_duration_and_face_times_come_from_one_clock(group, group_faces):
    """90 frames at 30 fps whose stamps jump back half a second twice and repeat now and then: the worker
    moves each such frame one frame past the one before, and the duration it stores is on that same clock."""
    stamps = [33 * i - 500 * (i // 30) - (33 if i % 7 == 6 else 0) for i in range(90)]
    data = mkv_with_stamps_going_back(group, group_faces, stamps)
    event = factories.event()
    dnp_user = factories.member_with_reference(event, group, group_faces[DNP])
    run_worker_drain()
    photo = face_processed(event, data)

    latest = max(face.frame_time for face in photo.faces.filter(matched_user_id=dnp_user))
    assert latest > max(stamps) / 1000 + 0.5, "the frames' clock runs past the stamps (that is the case)"
    frame_ms = 1000 / 30
    assert latest * 1000 < photo.duration_ms <= latest * 1000 + frame_ms + 1, (latest, photo.duration_ms)
    public = read_video(read_bytes(photo.public_key))
    assert len(public.frames) == 90
    assert abs(public.times[-1] - latest) < 0.002, "the output's last frame at the last face's time"


def test_a_face_cut_by_the_frame_s_edge_is_no_witness_for_linking():
    """Part of a face embeds unlike the whole face (bench/edge_cuts.py): it never refuses its track's link."""
    from types import SimpleNamespace

    from faces.detection.clips import _clearly_seen
    from faces.engines import resident_engine

    frontal = np.array([[0.35, 0.4], [0.65, 0.4], [0.5, 0.55], [0.38, 0.75], [0.62, 0.75]]) * 120

    def face(x1: float, x2: float, left: float):
        landmarks = frontal + np.array([left, 100])
        return SimpleNamespace(box=np.array([x1, 100, x2, 250]), landmarks=landmarks, embedding_norm=30.0)

    whole, cut = face(200, 320, left=200), face(0, 66, left=-54)  # the same face, 55 % of it past the left edge
    assert _clearly_seen([whole, cut], resident_engine().name, 640, 360) == [True, False]
