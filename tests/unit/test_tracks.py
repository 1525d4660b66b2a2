"""Faces over time (docs/ARCHITECTURE.md §11): the detection schedule, linking, each track's reach, and
matching a track as a bag of embeddings."""

import itertools
import uuid
from types import SimpleNamespace

import numpy as np
import pytest

from faces.detection.clips import scheduled
from faces.people import Candidates, PhotoMatch
from faces.rendering.painters import PAINTING, tracks_of
from faces.thresholds import FaceQuality, FaceView, Thresholds
from faces.tracks import TRACKING, link

FPS30 = [i / 30 for i in range(90)]  # 3 s at 30 fps


def box(x: float, y: float = 0.4, w: float = 0.1) -> np.ndarray:
    return np.array([x, y, x + w, y + w * 1.2])


def looked_at(times: list[float], every_frame: bool = False, cut_before=lambda time: False) -> list[float]:
    return [
        time
        for time, _, look in scheduled(((t, None, cut_before(t)) for t in times), every_frame, TRACKING.look_interval_s)
        if look
    ]


def test_a_video_is_detected_every_interval_and_on_its_first_and_last_frames():
    times = looked_at(FPS30)
    assert times[:3] == pytest.approx([0.0, 0.2, 0.4])
    assert times[-1] == FPS30[-1]
    assert len(times) == 16, "5 looks a second, not 30"


def test_both_sides_of_a_cut_are_looked_at():
    cut = FPS30[40]
    looks = looked_at(FPS30, cut_before=lambda time: time == cut)
    assert FPS30[39] in looks
    assert cut in looks
    assert FPS30[39] not in looked_at(FPS30), "the frame before the cut is looked at for the cut"


@pytest.mark.parametrize("seed", range(5))
def test_no_two_looks_are_further_apart_than_the_interval_whatever_the_frame_times(seed):
    """Variable frame rates: a frame is looked at when skipping it would leave too long a gap."""
    gaps = np.random.default_rng(seed).choice([0.01, 0.033, 0.05, 0.15, 0.3], size=200)
    times = np.cumsum(gaps).tolist()
    looks = looked_at(times)
    for before, after in itertools.pairwise(looks):
        frames_between = [t for t in times if before < t < after]
        assert after - before <= TRACKING.look_interval_s + 1e-6 or not frames_between


def test_an_animated_image_is_detected_on_every_frame():
    assert looked_at([0.0, 0.08, 0.2, 1.2], every_frame=True) == [0.0, 0.08, 0.2, 1.2]


def test_the_padding_reaches_past_the_next_look():
    """Padding shorter than the interval would leave frames between two looks uncovered."""
    assert PAINTING.track_pad_s > TRACKING.look_interval_s


def test_a_moving_face_is_one_track_and_two_guests_are_two():
    sightings = []
    for step in range(8):
        time = step * TRACKING.look_interval_s
        sightings += [(time, box(0.05 + step * 0.06)), (time, box(0.8, y=0.1))]
    tracks = link(sightings)
    mover, still = set(tracks[0::2]), set(tracks[1::2])
    assert len(mover) == 1
    assert len(still) == 1
    assert mover != still


def test_a_group_walking_a_face_s_width_a_look_is_linked_by_likeness_not_nearness():
    """Two guests side by side move 1.5 face widths between two looks: each one's next sighting is nearer
    the other's last. Linked by nearness, each track's path runs back over the other face and neither
    guest's own path is blurred; their embeddings say who is who."""
    rng = np.random.default_rng(0)
    left_look, right_look = (v / np.linalg.norm(v) for v in rng.normal(size=(2, 512)))
    sightings = [(0.0, box(0.30)), (0.0, box(0.42)), (0.2, box(0.45)), (0.2, box(0.57))]
    assert link(sightings) == [0, 1, 1, 0], "by nearness: the two tracks swap guests"
    seen_again = [look + rng.normal(scale=0.02, size=512) for look in (left_look, right_look)]
    embeddings = [left_look, right_look, *(v / np.linalg.norm(v) for v in seen_again)]
    assert link(sightings, embeddings=embeddings) == [0, 1, 0, 1]


def test_a_face_missed_once_keeps_its_track_and_one_gone_long_starts_a_new_one():
    missed_once = [(0.0, box(0.3)), (0.2, box(0.31)), (0.6, box(0.33))]
    assert len(set(link(missed_once))) == 1
    gone = [(0.0, box(0.3)), (0.2, box(0.31)), (0.2 + TRACKING.max_gap_s + 0.2, box(0.31))]
    assert len(set(link(gone))) == 2


def test_a_face_that_jumps_across_the_frame_is_not_the_same_track():
    assert len(set(link([(0.0, box(0.05)), (0.2, box(0.85))]))) == 2


def test_a_jump_no_face_makes_in_one_frame_starts_a_new_track():
    """Five face widths in a thirtieth of a second (an unseen cut, or another guest in turn): never one face,
    though the same distance between two looks 0.2 s apart is a walk the link allows."""
    assert len(set(link([(0.0, box(0.05)), (1 / 30, box(0.55))]))) == 2
    assert len(set(link([(0.0, box(0.05)), (0.2, box(0.45))]))) == 1


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def test_two_clearly_seen_people_are_never_one_track_but_a_poorly_seen_look_keeps_its_track():
    """Two strangers (similarity about 0) at one place a look apart: by speed they could be one face. Clearly
    seen both, they are two tracks; when one is poorly seen (a blurred frame: its embedding is no witness),
    speed decides, as before."""
    rng = np.random.default_rng(1)
    first, second = (unit(v) for v in rng.normal(size=(2, 512)))
    sightings = [(0.0, box(0.30)), (0.2, box(0.32))]
    assert len(set(link(sightings, embeddings=[first, second], clear=[True, True]))) == 2
    assert len(set(link(sightings, embeddings=[first, second], clear=[True, False]))) == 1
    same_again = unit(first + rng.normal(scale=0.03, size=512))
    assert len(set(link(sightings, embeddings=[first, same_again], clear=[True, True]))) == 1


def test_a_track_is_held_to_its_last_clearly_seen_face_across_poorly_seen_ones():
    """A clear face, then a blurred look, then a clear stranger: the stranger does not join through the blur."""
    rng = np.random.default_rng(2)
    first, blurred, stranger = (unit(v) for v in rng.normal(size=(3, 512)))
    sightings = [(0.0, box(0.30)), (0.2, box(0.31)), (0.4, box(0.32))]
    tracks = link(sightings, embeddings=[first, blurred, stranger], clear=[True, False, True])
    assert tracks[0] == tracks[1] != tracks[2]


def test_a_track_covers_every_frame_between_its_neighbouring_looks():
    """Seen at 1.0 and 1.4 only: every frame after the look at 0.8 and before the one at 1.6 is blurred."""
    track = tracks_of([(0, 1.0, box(0.3)), (0, 1.4, box(0.5))])[0]
    for time in FPS30:
        covered = bool(track.boxes_at(time))
        if 0.8 <= time <= 1.6:
            assert covered, f"frame at {time:.3f} s uncovered"
        if time < 0.7 or time > 1.7:
            assert not covered, f"frame at {time:.3f} s blurred far from any sighting"


def test_between_two_looks_the_boxes_follow_the_path():
    track = tracks_of([(0, 1.0, box(0.3)), (0, 1.2, box(0.5))])[0]
    np.testing.assert_allclose(track.boxes_at(1.0), [box(0.3)])
    path = track.boxes_at(1.1)
    assert all(b[2] - b[0] == pytest.approx(0.1) for b in path), "face-sized boxes, not one long hull"
    centres = sorted((b[0] + b[2]) / 2 for b in path)
    assert centres[0] == pytest.approx(0.35)
    assert centres[-1] == pytest.approx(0.55), "from where the face was to where it went"
    assert max(np.diff(centres)) <= 0.25 * 0.1 + 1e-9, "a quarter of a face width apart"


def test_past_its_ends_a_track_is_carried_on_at_its_pace_and_grows():
    """Entering at a run between two looks: the boxes before the first sighting reach back along its way."""
    track = tracks_of([(0, 1.0, box(0.4)), (0, 1.2, box(0.6))])[0]
    before = track.boxes_at(0.85)
    # At its pace (a frame width a second) the face was at x 0.25-0.35 at 0.85 s.
    assert min(b[0] for b in before) < 0.25, "carried back along its way, and grown"
    assert all(b[2] - b[0] > 0.1 for b in before), "grown"
    (lone,) = tracks_of([(0, 1.0, box(0.4))])[0].boxes_at(1.2)
    assert lone[2] - lone[0] > 0.1 * (1 + 2 * 2), "seen once: may have gone any way, fast"


def test_a_gap_in_a_track_is_covered_from_both_ends():
    """Hidden for a while, then back somewhere else: both sightings reach into the gap."""
    track = tracks_of([(0, 1.0, box(0.1)), (0, 1.2, box(0.2)), (0, 1.6, box(0.7)), (0, 1.8, box(0.8))])[0]
    near_return = track.boxes_at(1.55)
    assert any(b[0] <= 0.65 and b[2] >= 0.7 for b in near_return), "where the face came back from"


CANDIDATES = Candidates(
    user_ids=[uuid.UUID(int=1)],
    dnp=np.array([True]),
    references=np.zeros((1, 512), dtype=np.float32),
    owners=np.array([0]),
)
THRESHOLDS = Thresholds(match=0.9, blur=0.8, cluster=0.9)


def match(
    similarities: list[float],
    tracks: list[int],
    hidden: list[float] | None = None,
    thresholds: Thresholds = THRESHOLDS,
    norms: list[float] | None = None,
) -> PhotoMatch:
    faces = [SimpleNamespace(id=i, track=t) for i, t in enumerate(tracks)]
    shares, norms = hidden or [0.0] * len(faces), norms or [24.0] * len(faces)
    views = [FaceView(FaceQuality(100, 0.0, norm), share) for share, norm in zip(shares, norms, strict=True)]
    similarity = np.array([[s] for s in similarities], dtype=np.float32)
    return PhotoMatch.of(faces, CANDIDATES, similarity, thresholds.judge(views)).by_track()


def test_a_track_takes_its_best_face_not_its_average():
    """One frontal look at the DNP guest among profile frames: the whole track is theirs and blurred."""
    pooled = match([0.2, 0.3, 0.95, 0.25], tracks=[0, 0, 0, 0])
    assert pooled.blurred() == [True] * 4
    assert {user for user, _ in pooled.best()} == {uuid.UUID(int=1)}
    assert pooled.blurred(viewer=uuid.UUID(int=1)) == [False] * 4
    averaged = float(np.mean([0.2, 0.3, 0.95, 0.25]))
    assert averaged < THRESHOLDS.blur, "an averaged vector's similarity would not have reached blur"


def test_tracks_are_decided_apart():
    assert match([0.95, 0.1, 0.2], tracks=[0, 1, 1]).blurred() == [True, False, False]


def test_a_track_reaches_a_member_when_any_face_reaches_its_own_threshold():
    """A DNP guest motion-blurred on the frames looked at: weak embeddings held to the lower threshold of a
    poorly seen face, while a sharp stranger's track at the same similarity stays visible."""
    thresholds = Thresholds(match=0.9, blur=0.8, cluster=0.9, poor_face_blur=0.15, weak_norm=21, unsure_norm=16)
    assert match([0.2, 0.18], tracks=[0, 0], thresholds=thresholds, norms=[18.0, 19.0]).blurred() == [True, True]
    assert match([0.2, 0.18], tracks=[0, 0], thresholds=thresholds, norms=[24.0, 25.0]).blurred() == [False, False]
    # One face too poorly seen to judge does not make a track of sharp faces unsure; a track of such faces is.
    assert match([0.1, 0.1], tracks=[0, 0], thresholds=thresholds, norms=[12.0, 24.0]).blurred() == [False, False]
    assert match([0.1, 0.1], tracks=[0, 0], thresholds=thresholds, norms=[12.0, 13.0]).blurred() == [True, True]


def test_one_edge_cut_face_does_not_make_a_whole_track_unsure_but_an_all_cut_track_is():
    assert match([0.1, 0.1], tracks=[0, 0], hidden=[0.6, 0.0]).blurred() == [False, False]
    assert match([0.1, 0.1], tracks=[0, 0], hidden=[0.6, 0.5]).blurred() == [True, True]


def test_a_cut_is_looked_at_on_both_sides_and_no_track_goes_on_across_it():
    cut = FPS30[10]
    looks = [
        t
        for t, _, look in scheduled(((t, None, t == cut) for t in FPS30[:30]), False, TRACKING.look_interval_s)
        if look
    ]
    assert FPS30[9] in looks, "the old scene's last frame"
    assert cut in looks, "the new scene's first frame"
    same_place = [(FPS30[6], box(0.3)), (FPS30[12], box(0.3))]
    assert len(set(link(same_place))) == 1
    assert len(set(link(same_place, cuts=[cut]))) == 2


def test_a_frame_searched_in_parts_only_continues_the_tracks_last_seen_in_those_parts():
    """A face found in a changed region between two looks must not take over a track of a face that was
    not looked for there (it would move that track off its face)."""
    standing = (0.0, box(0.1, y=0.3, w=0.05))
    found_in_region = (FPS30[4], box(0.1, y=0.05, w=0.05))  # 5 face widths from `standing`: within reach
    assert link([standing, found_in_region]) == [0, 0], "without the searched regions, linked"
    searched = {FPS30[4]: [np.array([0.0, 0.0, 0.3, 0.2])]}
    assert link([standing, found_in_region], searched=searched) == [0, 1]
