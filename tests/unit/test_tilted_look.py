"""A tilted look's geometry (faces.engines.pyramid.TiltedLook): the crop is the candidate's surroundings turned
about its centre, and what the detector finds there is turned back to the image's pixels; and what a turned level's
tilted look adds to the faces (`PyramidDetector._upright_first`)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from faces.engines.base import PHOTO_PLAN
from faces.engines.pyramid import PyramidDetector, TiltedLook


@pytest.fixture
def image() -> np.ndarray:
    return np.random.default_rng(3).integers(0, 256, (300, 400, 3), dtype=np.uint8)


def test_a_sliver_is_looked_at_no_larger_than_a_face(image):
    """A face the image's edge cuts leaves a box 4 px wide and 145 tall: enlarged to verify_width it made 4,300 px
    looks, seven of them a face (nine seconds for a 400 x 300 photo)."""
    sliver = np.array([396, 60, 400, 205], np.float32)
    (look,) = TiltedLook.around(image, sliver, PHOTO_PLAN, (45.0,))
    assert look.size <= 2 * PHOTO_PLAN.verify_context * PHOTO_PLAN.verify_width


@pytest.mark.parametrize("angle", [45.0, -45.0])
@pytest.mark.parametrize("width", [32.0, 128.0])  # enlarged to verify_width, and shrunk to it
def test_the_crop_is_the_candidate_turned_about_its_centre_and_maps_back(image, angle, width):
    box = np.array([150, 100, 150 + width, 100 + 1.2 * width], np.float32)
    looks = TiltedLook.around(image, box, PHOTO_PLAN, PHOTO_PLAN.tilted_looks)
    assert len(looks) == len(PHOTO_PLAN.tilted_looks)
    look = looks[PHOTO_PLAN.tilted_looks.index(angle)]
    assert look.crop.shape == (look.size, look.size, 3)
    assert look.size == round(PHOTO_PLAN.verify_context * 1.2 * width * PHOTO_PLAN.verify_width / width)
    centre = look.back @ [look.size / 2, look.size / 2, 1.0]
    np.testing.assert_allclose(centre, [(box[0] + box[2]) / 2, (box[1] + box[3]) / 2], atol=0.5)
    # The look shows the image turned `angle` degrees counter-clockwise: one detector pixel to the right there is
    # `angle` degrees clockwise of right in the image (as shown, y down), width / verify_width image px long.
    step = look.back[:, :2] @ [1.0, 0.0]
    scale = width / PHOTO_PLAN.verify_width
    turned = math.radians(angle)
    np.testing.assert_allclose(step, [scale * math.cos(turned), scale * math.sin(turned)], rtol=0.02, atol=0.01)


def test_a_tilted_detection_comes_back_as_the_upright_bounds_of_its_ellipse_with_its_landmarks():
    image = np.zeros((300, 400, 3), np.uint8)
    box = np.array([150, 100, 214, 180], np.float32)  # 64 wide: no scaling
    (look, _) = TiltedLook.around(image, box, PHOTO_PLAN, PHOTO_PLAN.tilted_looks)  # 45 degrees
    half = look.size / 2
    found = np.array([[half - 32, half - 40, half + 32, half + 40]], np.float32)  # 64 x 80, centred in the look
    points = np.array([[[half, half - 40]] * 5], np.float32)  # all at the top of the box
    bounds, landmarks, score = look.verdict(box, found, points, np.array([0.7]), least_iou=0.3)
    # An ellipse of semi-axes 32 and 40 turned 45 degrees reaches sqrt((32² + 40²) / 2) along each axis.
    reach = math.sqrt((32**2 + 40**2) / 2)
    np.testing.assert_allclose(bounds, [182 - reach, 140 - reach, 182 + reach, 140 + reach], atol=0.5)
    # The top of the box in the look, 40 px above the centre, is up and to the right in the image: a face tilted 45
    # degrees clockwise, which the look showed upright.
    np.testing.assert_allclose(landmarks[0], [182 + 40 * math.sqrt(0.5), 140 - 40 * math.sqrt(0.5)], atol=0.5)
    assert score == pytest.approx(0.7)


def test_no_detection_overlapping_the_candidate_is_no_face():
    image = np.zeros((300, 400, 3), np.uint8)
    box = np.array([150, 100, 214, 180], np.float32)
    (look, _) = TiltedLook.around(image, box, PHOTO_PLAN, PHOTO_PLAN.tilted_looks)
    corner = np.array([[0, 0, 8, 8]], np.float32)
    assert look.verdict(box, corner, np.zeros((1, 5, 2), np.float32), np.array([0.9]), least_iou=0.3) is None
    assert look.verdict(box, np.zeros((0, 4)), np.zeros((0, 5, 2)), np.zeros(0), least_iou=0.3) is None


def found(x: float, score: float, size: float = 60.0):
    """A detection (box, landmarks, score) whose box starts at (x, 100)."""
    return np.array([x, 100, x + size, 100 + size], np.float32), np.zeros((5, 2), np.float32), score


def test_a_turned_levels_tilted_find_is_a_view_where_none_was_a_face_from_its_score_and_never_replaces_a_view():
    upright = [found(0, 0.9), found(200, 0.8)]
    turned = [found(2, 0.7)]  # the first upright face's turned view
    tilted = [
        found(1, 0.95),  # the first face again: its turned view stays the turned level's
        found(201, 0.6),  # the second face, which no turned level saw: its view, whatever its score
        found(400, 0.65),  # nothing else there, under turned_tilted_score: not a face
        found(600, 0.75),  # nothing else there, from turned_tilted_score: a face of its own
    ]
    faces = PyramidDetector._upright_first(SimpleNamespace(plan=PHOTO_PLAN), upright, turned, tilted)
    assert [(face[0][0], view and view[0][0]) for face, view in faces] == [(0, 2), (200, 201), (600, None)]
