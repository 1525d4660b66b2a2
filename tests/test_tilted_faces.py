"""Faces tilted between the quarter turns (docs/ARCHITECTURE.md §6, "The pyramid"): a candidate whose upright second
look fails is looked at again with its surroundings turned 45 degrees each way (`Plan.tilted_looks`), in the upright
levels and in the turned ones (`Plan.tilted_looks_in_turns`).

The real cases: the 2008 team photo (players.jpg) taken with the camera held 45 degrees askew, at 0.7 of its size
(the players' faces 25-35 px wide), where SCRFD sees every face 45 degrees off and the fourteenth player from the left
is found only by a tilted look; and t1's six faces 40 px wide, each turned 135 or 225 degrees (upside down and
askew) on a face-free photo, two of which only a turned level's tilted look finds.
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
    side = int(SCALE * (np.hypot(*team.shape[:2]) + 8))
    grey = {"flags": cv2.INTER_AREA, "borderValue": (128, 128, 128)}
    return samples.turned_onto_square(team, ASKEW_DEGREES, side, SCALE, **grey)


def near(faces, box: np.ndarray, turn: np.ndarray) -> list:
    """The faces whose centre lies within half the face's width (in the turned picture) of `box`'s centre there."""
    centre = turn @ np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2, 1.0])
    return near_centre(faces, centre, SCALE * (box[2] - box[0]) / 2)


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


@pytest.mark.parametrize("angle", [135, 225])
def test_a_face_tilted_past_a_quarter_turn_is_found_by_a_turned_levels_tilted_look(angle):
    engine = resident_engine()
    group = samples.group_photo()
    upright = sorted(engine.analyze(group), key=lambda face: face.box[0])
    picture, centres = six_faces_turned(group, upright, angle)
    found = [near_centre(engine.analyze(picture), centre, 20) for centre in centres]
    assert all(found), "every face is found"
    upright_looks_only = engine.detect(picture, plan=replace(PHOTO_PLAN, tilted_looks_in_turns=False))
    lost = [i for i, centre in enumerate(centres) if not near_centre(upright_looks_only, centre, 20)]
    assert len(lost) == 2, "without the turned levels' tilted looks, two are lost"
    for i in lost:
        assert max(float(face.embedding @ upright[i].embedding) for face in found[i]) > 0.8, "turned back right"


def test_a_turned_levels_tilted_look_never_replaces_a_faces_turned_view(team):
    """players.jpg turned 210 degrees: Yao Ming's face, upside down and 30 degrees askew, is found by the upright
    levels with its landmarks the wrong way up, and by a turned level the right way. A tilted look in another turned
    level found it the wrong way up again, scoring higher: had it become the face's turned view, he would embed at
    0.09 against his own photo, not 0.58, and a DNP Yao would stay visible."""
    engine = resident_engine()
    reference = engine.analyze(samples.read(samples.vectron_image("yaoming.jpg")), small_faces=False)[0].embedding
    side = int(np.hypot(*team.shape[:2])) + 8
    picture, turn = samples.turned_onto_square(team, 210, side, borderMode=cv2.BORDER_REPLICATE)
    yao = samples.yao_ming_box(engine)
    centre = turn @ np.array([(yao[0] + yao[2]) / 2, (yao[1] + yao[3]) / 2, 1.0])
    (face,) = near_centre(engine.analyze(picture), centre, (yao[2] - yao[0]) / 2)
    assert float(face.embedding @ reference) > 0.5


def six_faces_turned(group: np.ndarray, faces: list, angle: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """t1's faces, each 40 px wide and turned `angle` degrees about its centre, feathered into coffee.png scaled to
    1800 x 1200 on a grid of three by two; and their centres there."""
    picture = cv2.resize(samples.face_free_scenes()[0], (1800, 1200), interpolation=cv2.INTER_CUBIC)
    centres = []
    for index, face in enumerate(faces):
        crop = samples.crop_around(group, face.box, margin=0.5)
        crop = cv2.resize(crop, None, fx=80 / crop.shape[1], fy=80 / crop.shape[1], interpolation=cv2.INTER_AREA)
        side = int(np.hypot(*crop.shape[:2]))
        turned, _ = samples.turned_onto_square(crop, angle, side, borderMode=cv2.BORDER_REPLICATE)
        turned = turned.astype(np.float32)
        ys, xs = np.mgrid[:side, :side]
        radius = np.hypot(xs - side / 2, ys - side / 2)
        alpha = np.clip((side * 0.42 - radius) / (side * 0.08), 0, 1)[..., None]
        left, top = 150 + (index % 3) * 550, 150 + (index // 3) * 550
        region = picture[top : top + side, left : left + side].astype(np.float32)
        picture[top : top + side, left : left + side] = (region * (1 - alpha) + turned * alpha).astype(np.uint8)
        centres.append(np.array([left + side / 2, top + side / 2]))
    return picture, centres


def near_centre(faces, centre: np.ndarray, reach: float) -> list:
    """The faces whose box's centre lies within `reach` px of `centre` on both axes."""
    return [f for f in faces if np.abs((f.box[:2] + f.box[2:]) / 2 - centre).max() < reach]
