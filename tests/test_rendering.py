"""Blur strength, blur geometry and file hygiene, on real photos with the real buffalo_s engine."""

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from faces import thresholds
from faces.engines import resident_engine
from faces.media.upload import encode_jpeg, thumbnail
from faces.rendering.painters import (
    PAINTING,
    blur_ellipse,
    blur_rectangle,
    expanded_face_box,
    face_stroke,
    region_box,
)
from momentlens.devservices import samples
from tests.conftest import ENGINE


def fraction_box(face, width, height):
    x1, y1, x2, y2 = face.box
    return (x1 / width, y1 / height, (x2 - x1) / width, (y2 - y1) / height)


def test_a_blurred_face_no_longer_matches_its_owner_at_the_blur_threshold(group):
    """Each t1 face in turn is the DNP face: its reference is a different image of it."""
    engine = resident_engine()
    blur_at = thresholds.for_engine(ENGINE).blur
    height, width = group.shape[:2]
    for face in engine.analyze(group):
        reference = engine.analyze(samples.derived_portrait(group, face.box))[0].embedding
        assert float(face.embedding @ reference) >= blur_at, "unblurred, the face does match its reference"
        blurred = group.copy()
        face_stroke(fraction_box(face, width, height), width, height).paint(blurred)
        blurred = cv2.imdecode(np.frombuffer(encode_jpeg(blurred), np.uint8), cv2.IMREAD_COLOR)
        for found in engine.analyze(blurred):
            overlaps = not (found.box[2] < face.box[0] or found.box[0] > face.box[2])
            overlaps = overlaps and not (found.box[3] < face.box[1] or found.box[1] > face.box[3])
            if overlaps:
                assert float(found.embedding @ reference) < blur_at


def test_the_face_ellipse_is_the_box_grown_by_35_percent(group):
    height, width = group.shape[:2]
    box = (0.4, 0.3, 0.1, 0.2)
    x1, y1, x2, y2 = expanded_face_box(box, width, height)
    assert (x2 - x1) == pytest.approx(0.1 * width * (1 + PAINTING.face_expansion), abs=2)
    assert (y2 - y1) == pytest.approx(0.2 * height * (1 + PAINTING.face_expansion), abs=2)
    out = group.copy()
    blur_ellipse(out, (x1, y1, x2, y2))
    changed = np.abs(out.astype(int) - group.astype(int)).sum(axis=2) > 0
    assert not changed[:y1].any()
    assert not changed[y2:].any()
    assert not changed[:, :x1].any()
    assert not changed[:, x2:].any()
    assert not changed[y1, x1], "the corners stay: the mask is an ellipse"
    assert not changed[y2 - 1, x2 - 1]
    assert changed[(y1 + y2) // 2, (x1 + x2) // 2]


def test_a_blur_region_is_exactly_the_rectangle_drawn(group):
    height, width = group.shape[:2]
    x1, y1, x2, y2 = region_box({"x": 0.1, "y": 0.2, "w": 0.3, "h": 0.25}, width, height)
    out = group.copy()
    blur_rectangle(out, (x1, y1, x2, y2))
    changed = np.abs(out.astype(int) - group.astype(int)).sum(axis=2) > 0
    assert changed[y1:y2, x1:x2].mean() > 0.9
    outside = changed.copy()
    outside[y1:y2, x1:x2] = False
    assert not outside.any()


def detail(image: np.ndarray) -> float:
    return float(np.abs(cv2.Laplacian(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.CV_32F)).mean())


def test_the_blur_discards_detail_rather_than_smoothing_it(group):
    """Far less of the face's detail survives than a light Gaussian would leave."""
    from faces.rendering.painters import destroyed

    roi = group[250:420, 460:580].copy()
    gone = destroyed(roi, strength_side=min(roi.shape[:2]))
    assert detail(gone) < 0.2 * detail(roi)
    assert detail(gone) < detail(cv2.GaussianBlur(roi, (0, 0), 2.0))


def test_derived_files_carry_no_exif_and_thumbnails_fit_300px(group):
    data = encode_jpeg(group)
    with Image.open(io.BytesIO(data)) as image:
        assert not image.getexif()
        assert "exif" not in image.info
    assert b"Exif" not in data[:4096]
    small = thumbnail(group)
    assert max(small.shape[:2]) == 300
    assert small.shape[1] / small.shape[0] == pytest.approx(group.shape[1] / group.shape[0], rel=0.01)
