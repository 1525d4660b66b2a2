"""Each DNP reference's blur bar moves by how near strangers come to it (faces/population.py), with real faces and
the committed population: Yao Ming's selfie (yaoming.jpg) is one that strangers rarely come near, so his bar is
lowered and a face of his under the flat bar is blurred; one of t1's six is a face strangers often come near, so
its bar is raised and a stranger seen clearly just over the flat bar stays visible (one seen poorly does not).
Each test sets the flat bar between the two bars the face is judged by, from the similarity the engine reads, and
checks both decisions on the same faces."""

import dataclasses
import math

import numpy as np
import pytest
from django.core.checks import ERROR
from django.utils import timezone

from faces import checks, population, thresholds
from faces.detection import detect_and_store
from faces.engines import resident_engine
from faces.exposure import _candidates
from faces.models import Photo
from faces.people import Candidates, match_faces
from faces.population import Moments
from faces.publication import faces_blurred_in
from momentlens.devservices import samples
from tests.conftest import ENGINE
from tests.support import factories

pytestmark = [pytest.mark.usefixtures("media_storage"), pytest.mark.django_db]


def judged_at(
    monkeypatch, measured: thresholds.Thresholds, flat_bar: float, *, calibrated: bool, poorly: bool = False
) -> None:
    """The engine's thresholds with every face's flat bar at `flat_bar`, every face seen clearly (`poorly`: every
    face seen poorly, as a turned one is), nobody unsure, and `match` out of the way: only the blur decision is
    tried."""
    bar = round(flat_bar, 4)
    judged = dataclasses.replace(
        measured,
        blur=bar,
        poor_face_blur=bar,
        turned_face=0.0 if poorly else math.inf,
        unsure_norm=0,
        match=1.0,
        clear_match=None,
        calibrated=calibrated,
    )
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, judged)


def uploaded(event, image: np.ndarray):
    photo = factories.photo(event, image, width=image.shape[1], height=image.shape[0])
    faces = detect_and_store(photo, factories.still_of(image), resident_engine())
    return photo, faces


def blurred_ids(photo, size) -> set:
    match_faces(photo, size)
    return {face.id for face in faces_blurred_in(photo)}


def yao_in_the_team_photo():
    """Yao Ming a DNP member, yaoming.jpg his selfie; a crop of the team photo around him uploaded and detected:
    (his selfie, the crop, his user id, the photo, his stored face)."""
    selfie = max(resident_engine().analyze(samples.read(samples.vectron_image("yaoming.jpg"))), key=_width)
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, selfie.embedding, ENGINE)
    team = samples.read(samples.vectron_image("players.jpg"))
    # Close around him: no neighbour cut by the crop's edge, which would make the photo a candidate on its own.
    crop = samples.crop_around(team, samples.yao_ming_box(resident_engine()), margin=0.4)
    photo, faces = uploaded(event, crop)
    assert len(faces) == 1
    return selfie, crop, user, photo, faces[0]


def test_a_selfie_strangers_rarely_reach_lowers_its_bar_and_blurs_a_face_under_the_flat_one(
    monkeypatch, test_thresholds
):
    selfie, crop, _, photo, his = yao_in_the_team_photo()
    shift = float(population.for_engine(ENGINE).shifts(selfie.embedding[None, :])[0])
    assert shift < -0.01, "strangers come less near his selfie than near a typical one"
    similarity = float(his.embedding @ selfie.embedding)
    size = (crop.shape[1], crop.shape[0])

    flat_bar = similarity - shift / 2  # over his similarity, within his lowered bar
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=True)
    assert his.id in blurred_ids(photo, size)
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=False)
    assert his.id not in blurred_ids(photo, size), "a flat bar leaves him visible: the calibration blurred him"


def test_a_selfie_strangers_often_reach_raises_its_bar_and_leaves_a_stranger_over_the_flat_one_visible(
    monkeypatch, test_thresholds, group, group_faces
):
    shifts = population.for_engine(ENGINE).shifts(np.array([face.embedding for face in group_faces]))
    member = int(np.argmax(shifts))
    assert shifts[member] > 0.01, "strangers come nearer one of t1's six than near a typical face"
    reference = group_faces[member].embedding
    event = factories.event()
    user = factories.member(event, dnp=True)
    factories.ready_reference(user, reference, ENGINE)
    photo, faces = uploaded(event, group)
    others = [face for face in faces if float(face.embedding @ reference) < 0.9]
    assert len(others) == 5
    nearest = max(others, key=lambda face: float(face.embedding @ reference))
    size = (group.shape[1], group.shape[0])

    flat_bar = float(nearest.embedding @ reference) - float(shifts[member]) / 2  # under the stranger, over the raised
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=True)
    assert nearest.id not in blurred_ids(photo, size)
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=False)
    assert nearest.id in blurred_ids(photo, size), "a flat bar blurs the stranger: the calibration kept them visible"
    # Seen poorly, a face says too little to be given a raised bar: blurred as under the flat one.
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=True, poorly=True)
    assert nearest.id in blurred_ids(photo, size)


def test_the_event_candidates_carry_each_references_shift(test_thresholds, monkeypatch, group_faces):
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, calibrated=True))
    event = factories.event()
    for face in group_faces[:3]:
        factories.ready_reference(factories.member(event, dnp=True), face.embedding, ENGINE)
    candidates = Candidates.for_event(event.id, ENGINE)
    expected = population.for_engine(ENGINE).shifts(candidates.references)
    assert np.allclose(candidates.shifts, expected, atol=1e-6)
    per_user = np.empty(len(candidates.user_ids))
    per_user[candidates.owners] = expected  # one reference each
    similarity, calibrated = candidates.scores(candidates.references)
    assert np.allclose(similarity, candidates.similarities(candidates.references))
    assert np.allclose(calibrated, similarity - per_user[None, :], atol=1e-6)


def test_hide_first_reaches_a_published_face_under_the_flat_bar_within_a_lowered_one(monkeypatch, test_thresholds):
    selfie, _, user, photo, his = yao_in_the_team_photo()
    similarity = float(his.embedding @ selfie.embedding)
    shift = float(population.for_engine(ENGINE).shifts(selfie.embedding[None, :])[0])
    Photo.objects.filter(id=photo.id).update(processed_at=timezone.now())
    flat_bar = similarity - shift / 2  # over his similarity, within his lowered bar
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=True)
    assert _candidates(photo.event_id, ENGINE, [user]) == [photo.id]
    judged_at(monkeypatch, test_thresholds, flat_bar, calibrated=False)
    assert _candidates(photo.event_id, ENGINE, [user]) == [], "a flat bar's candidates miss him"


def test_a_raised_bar_must_stay_under_the_match_thresholds():
    with pytest.raises(ValueError, match="raised blur bar"):
        thresholds.Thresholds(match=0.4, blur=0.34, cluster=0.35, clear_match=0.35, calibrated=True)


def test_calibrated_thresholds_without_their_population_fail_the_preflight(monkeypatch, tmp_path, test_thresholds):
    monkeypatch.setitem(thresholds.THRESHOLDS, ENGINE, dataclasses.replace(test_thresholds, calibrated=True))
    monkeypatch.setattr(population, "POPULATIONS", tmp_path)
    population.for_engine.cache_clear()
    try:
        (message,) = checks.thresholds()
    finally:
        population.for_engine.cache_clear()
    assert message.level == ERROR
    assert message.id == "faces.E007"
    assert "population is unreadable" in message.msg


def test_a_population_without_one_person_is_the_population_of_the_others():
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(12, 512))
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    people = ["a"] * 5 + ["b"] * 4 + ["c"] * 3
    without_a = Moments.of(embeddings, people).without("a")
    others = Moments.of(embeddings[5:], people[5:]).without(None)
    assert np.allclose(without_a.mean, others.mean)
    assert np.allclose(without_a.covariance, others.covariance)
    assert not np.allclose(Moments.of(embeddings, people).without(None).mean, others.mean)


def _width(face) -> float:
    return float(face.box[2] - face.box[0])
