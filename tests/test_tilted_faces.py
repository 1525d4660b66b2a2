"""Faces tilted between the quarter turns (docs/ARCHITECTURE.md §6, "The pyramid"): a candidate whose upright second
look fails is looked at again with its surroundings turned 45 degrees each way (`Plan.tilted_looks`).

The real case: the 2008 team photo (players.jpg) taken with the camera held 45 degrees askew, at 0.7 of its size
(the players' faces 25-35 px wide). SCRFD sees every face 45 degrees off; the fourteenth player from the left is
found only by a tilted look, and its landmarks, turned back, embed him as his upright face does.
"""

from dataclasses import replace

import cv2
import numpy as np
import pytest

from faces.engines import resident_engine
from faces.engines.base import PHOTO_PLAN
from faces.engines.pyramid import PyramidDetector
from momentlens.devservices import samples

ASKEW_DEGREES, SCALE = 45, 0.7
TILTED_PLAYER = 13  # from the left


@pytest.fixture(scope="module")
def team() -> np.ndarray:
    return samples.read(samples.vectron_image("players.jpg"))


@pytest.fixture(scope="module")
def players(team) -> list:
    """The sixteen players in front, left to right (the crowd behind them is 10-17 px wide)."""
    return sorted((f for f in resident_engine().analyze(team) if f.box[2] - f.box[0] >= 30), key=lambda f: f.box[0])


@pytest.fixture(scope="module")
def askew(team) -> tuple[np.ndarray, np.ndarray]:
    """The team photo turned ASKEW_DEGREES counter-clockwise and scaled by SCALE on a grey square that holds all of
    it, and the affine map from the photo's pixels to it."""
    height, width = team.shape[:2]
    side = int(SCALE * (np.hypot(width, height) + 8))
    turn = cv2.getRotationMatrix2D((width / 2, height / 2), ASKEW_DEGREES, SCALE)
    turn[:, 2] += [side / 2 - width / 2, side / 2 - height / 2]
    picture = cv2.warpAffine(team, turn, (side, side), flags=cv2.INTER_AREA, borderValue=(128, 128, 128))
    return picture, turn


def near(faces, box: np.ndarray, turn: np.ndarray) -> list:
    """The faces whose centre lies within half the face's width (in the turned picture) of `box`'s centre there."""
    centre = turn @ np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, 1.0])
    reach = SCALE * (box[2] - box[0]) / 2
    return [f for f in faces if np.abs((f.box[:2] + f.box[2:]) / 2 - centre).max() < reach]


def test_a_face_tilted_45_degrees_is_found_by_a_tilted_look_and_embeds_as_upright(askew, players):
    picture, turn = askew
    engine = resident_engine()
    found = engine.analyze(picture)
    assert all(near(found, player.box, turn) for player in players), "every player's face is found"

    player = players[TILTED_PLAYER]
    (tilted,) = near(found, player.box, turn)
    assert float(tilted.embedding @ player.embedding) > 0.9, "its landmarks are turned back: it embeds as upright"

    upright_only = engine.detect(picture, plan=replace(PHOTO_PLAN, tilted_looks=()))
    assert not near(upright_only, player.box, turn), "without the tilted looks the tilted face is lost"


def test_a_selfie_gets_no_tilted_looks(askew, monkeypatch):
    """A reference is looked at upright only, as by no turned level: a tilted false face must not become one."""
    picture, _ = askew
    looked = []
    tilted_looks = PyramidDetector._tilted_looks

    def counted(self, image, boxes):
        looked.append(len(boxes))
        return tilted_looks(self, image, boxes)

    monkeypatch.setattr(PyramidDetector, "_tilted_looks", counted)
    resident_engine().detect(picture, small_faces=False)
    assert not any(looked)
    resident_engine().detect(picture)
    assert any(looked), "the same picture's faint candidates get tilted looks when it is a photo"
