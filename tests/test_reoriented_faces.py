"""Faces seen the wrong way up (docs/ARCHITECTURE.md §6, "The pyramid"): a face the recogniser sees poorly (norm under
`Plan.reorient_norm`) is looked at again with its surroundings turned (`Plan.reorient_looks`), and the view the
recogniser sees better is kept.

The real case: the 2008 team photo (players.jpg) turned 135 degrees, upside down and askew. The upright levels find
several players surely with their landmarks the wrong way up, and no turned level sees them (small at their ½x): they
embed as nobody, some of them above `unsure_norm`, so a DNP player turned so stayed visible.
"""

from dataclasses import replace

import cv2
import numpy as np
import pytest

from faces.engines import resident_engine
from faces.engines.base import PHOTO_PLAN
from faces.engines.insightface import placed_otherwise
from faces.engines.pyramid import PyramidDetector
from faces.thresholds import for_engine
from momentlens.devservices import samples

TURNED = 135
WITHOUT = replace(PHOTO_PLAN, reorient_looks=())


@pytest.fixture(scope="module")
def team() -> np.ndarray:
    return samples.read(samples.vectron_image("players.jpg"))


@pytest.fixture(scope="module")
def players(team) -> list:
    """The sixteen players in front as the engine sees them upright (the crowd behind them is 10-17 px wide)."""
    return [f for f in resident_engine().analyze(team) if f.box[2] - f.box[0] >= 30]


@pytest.fixture(scope="module")
def team_turned(team) -> tuple[np.ndarray, np.ndarray]:
    """The team photo turned TURNED degrees on a square that holds all of it, and the map from its pixels there."""
    side = int(np.hypot(*team.shape[:2])) + 8
    return samples.turned_onto_square(team, TURNED, side, borderMode=cv2.BORDER_REPLICATE)


@pytest.fixture(scope="module")
def turned(team_turned, players) -> tuple[list, list, list]:
    """For each player: his faces in the photo turned TURNED degrees, with and without the looks, and his upright
    face."""
    picture, turn = team_turned
    engine = resident_engine()
    looked, unlooked = engine.analyze(picture), engine.analyze(picture, plan=WITHOUT)
    rows = []
    for player in players:
        centre = turn @ np.array([(player.box[0] + player.box[2]) / 2, (player.box[1] + player.box[3]) / 2, 1.0])
        reach = (player.box[2] - player.box[0]) / 2
        rows.append((*(near(faces, centre, reach) for faces in (looked, unlooked)), player))
    return rows


def test_a_face_seen_the_wrong_way_up_is_looked_at_turned_and_embeds_as_itself(turned):
    thresholds = for_engine(resident_engine().name)
    visible_before = [
        index
        for index, (_, unlooked, player) in enumerate(turned)
        if unlooked and all(f.embedding_norm >= thresholds.unsure_norm and nobody(f, player) for f in unlooked)
    ]
    assert len(visible_before) >= 3, "without the looks, players above unsure_norm embed as nobody: DNP, visible"
    for index, (looked, _, player) in enumerate(turned):
        assert looked or index not in visible_before
        if looked:
            assert max(float(f.embedding @ player.embedding) for f in looked) > 0.8, "each one found is himself"


def test_a_reoriented_face_keeps_at_least_the_box_it_had(turned):
    """The blur paints the face's box: a view from a turned look must not uncover what the first one covered."""
    changed = 0
    for looked, unlooked, _ in turned:
        for before, after in zip(unlooked, looked, strict=True):  # one face near each player, either way
            assert (after.box[:2] <= before.box[:2] + 1e-3).all()
            assert (after.box[2:] >= before.box[2:] - 1e-3).all()
            changed += not np.allclose(after.box, before.box)
    assert changed, "some faces took a turned look's view"


def test_only_whole_faces_as_wide_as_a_turned_level_finds_are_looked_at(team, team_turned, monkeypatch):
    """The crowd behind the team (10-17 px, seen poorly) gets no looks, nor a face the edge cuts (a sliver's look
    would be megapixels); the players turned 135 degrees do."""
    looked = []
    looks_turned = PyramidDetector.looks_turned

    def counted(self, image, boxes, angles):
        if angles == PHOTO_PLAN.reorient_looks:  # not a candidate's tilted look
            looked.extend((box, image.shape[:2]) for box in boxes)
        return looks_turned(self, image, boxes, angles)

    monkeypatch.setattr(PyramidDetector, "looks_turned", counted)
    faces = resident_engine().analyze(team)
    poor_and_narrow = [f for f in faces if f.embedding_norm < PHOTO_PLAN.reorient_norm and f.box[2] - f.box[0] < 32]
    assert len(poor_and_narrow) > 20, "the crowd is seen poorly"
    resident_engine().analyze(team_turned[0])
    assert looked, "players turned are looked at"
    for box, (height, width) in looked:
        assert box[2] - box[0] >= 32, "a crowd face was looked at"
        assert (box[:2] > 0).all()
        assert (box[2:] < [width, height]).all()


def test_landmarks_placed_otherwise():
    eyes_nose_mouth = np.array([[30, 40], [70, 40], [50, 60], [35, 80], [65, 80]], np.float32)
    assert not placed_otherwise(eyes_nose_mouth, eyes_nose_mouth + 3, width=100)
    upside_down = 120 - eyes_nose_mouth
    assert placed_otherwise(eyes_nose_mouth, upside_down, width=100)


def near(faces: list, centre: np.ndarray, reach: float) -> list:
    return [f for f in faces if np.abs((f.box[:2] + f.box[2:]) / 2 - centre).max() < reach]


def nobody(face, player) -> bool:
    """The face embeds as nobody near the player: under any blur threshold against his upright face."""
    return float(face.embedding @ player.embedding) < 0.2
