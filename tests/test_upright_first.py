"""Upright first (docs/ARCHITECTURE.md §6): a face both the upright and a turned level find is embedded as the
recogniser sees it upright.

The real case, found by searching tight crops of the registry packages' photos: Yao Ming's face cut out of the
2008 team photo (players.jpg, the box plus 5 %), scaled to 150 px and padded to twice its size with flat grey,
as a tight crop reaches the worker. A turned level scores it higher (0.825) than the upright levels (0.811),
with its mouth above its eyes; embedded that way it reaches 0.04 against his own face. Before, one NMS over
both kinds of level kept the turned box, and the DNP member was never matched in his own photo.
"""

import cv2
import numpy as np
import pytest

from faces.engines import resident_engine
from faces.models import Face, Photo
from faces.thresholds import for_engine
from momentlens.devservices import samples
from momentlens.devservices.pixels import difference, face_core
from tests.conftest import ENGINE
from tests.support import factories
from tests.support.publishing_helpers import read_image, run_worker_drain
from tests.support.queue_helpers import send


@pytest.fixture(scope="module")
def tight_crop() -> np.ndarray:
    team = samples.read(samples.vectron_image("players.jpg"))
    x1, y1, x2, y2 = samples.yao_ming_box(resident_engine())
    margin_x, margin_y = 0.05 * (x2 - x1), 0.05 * (y2 - y1)
    crop = team[int(y1 - margin_y) : int(y2 + margin_y), int(x1 - margin_x) : int(x2 + margin_x)]
    scale = 150 / max(crop.shape[:2])
    crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    top, left = crop.shape[0] // 2, crop.shape[1] // 2
    return cv2.copyMakeBorder(crop, top, top, left, left, cv2.BORDER_CONSTANT, value=(128, 128, 128))


@pytest.fixture(scope="module")
def his_reference() -> np.ndarray:
    (face,) = resident_engine().analyze(samples.read(samples.vectron_image("yaoming.jpg")), small_faces=False)
    return face.embedding


def mouth_above_eyes(landmarks) -> bool:
    return (landmarks[3][1] + landmarks[4][1]) / 2 < (landmarks[0][1] + landmarks[1][1]) / 2


def test_a_turned_level_outscores_the_upright_one_upside_down(tight_crop):
    """The premise: what the merge by score would have kept."""
    (face,) = resident_engine().detect(tight_crop)
    assert face.turned is not None, "both kinds of level found him"
    assert face.turned.score > face.score
    assert mouth_above_eyes(face.turned.landmarks)
    assert not mouth_above_eyes(face.landmarks)


def test_he_is_embedded_upright_and_reaches_his_reference(tight_crop, his_reference):
    engine = resident_engine()
    (face,) = engine.analyze(tight_crop)
    assert not mouth_above_eyes(face.landmarks)
    assert float(face.embedding @ his_reference) >= for_engine(ENGINE).match
    (detection,) = engine.detect(tight_crop)
    upside_down = engine.embed_many(tight_crop, [detection.turned])
    assert float(upside_down.vectors[0] @ his_reference) < for_engine(ENGINE).lowest_blur, "what the old merge kept"


@pytest.mark.usefixtures("live_db", "media_storage", "fast_retries", "test_thresholds")
def test_through_the_worker_the_dnp_member_is_matched_in_his_own_photo_and_blurred(tight_crop):
    event = factories.event()
    user = factories.member(event, dnp=True)
    reference = factories.reference(user, data=samples.vectron_image("yaoming.jpg").read_bytes())
    send({"job": "reference_process", "reference_id": str(reference.id)})
    photo = factories.photo(event, data=cv2.imencode(".png", tight_crop)[1].tobytes())
    send({"job": "face_process", "photo_id": str(photo.id)})
    run_worker_drain()

    photo = Photo.objects.get(id=photo.id)
    (face,) = Face.objects.filter(photo=photo)
    assert face.matched_user_id == user
    assert photo.processed_at is not None
    assert difference(face_core(read_image(photo.public_key), face), face_core(tight_crop, face)) > 15
