"""What the measurement makes of events with several DNP members and of members with several references
(faces/measurement/events.py, verdicts.Pairs): similarities given, not computed from photos."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from faces.measurement.events import events_of
from faces.measurement.probes import AS_TAKEN, Probe
from faces.measurement.recommend import RULE, Grid, NoRecommendation, recommend
from faces.measurement.verdicts import Pairs, blurred, blurred_among_members, explained
from faces.thresholds import FaceQuality, Thresholds


def probe(person: str, image: str, embedding) -> Probe:
    vector = np.zeros(512, dtype=np.float32)
    vector[: len(embedding)] = embedding
    return Probe(person, Path(image), AS_TAKEN, np.zeros(4), 0.9, vector, FaceQuality(100.0, 0.0, 24.0))


def test_strangers_blurred_add_up_over_an_events_dnp_members():
    """Stranger s0 reaches member a, s1 reaches b: an event with a alone blurs one stranger in two (of those
    who are not a), with a and b both of them."""
    members = ["a", "b"]
    probes = [probe("s0", "s0", [1]), probe("s1", "s1", [1]), probe("a", "a2", [1]), probe("b", "b2", [1])]
    similarity = np.array([[0.5, 0.0], [0.0, 0.5], [0.9, 0.0], [0.0, 0.1]], dtype=np.float32)
    person = np.array([one.person for one in probes])[:, None]
    same = person == np.array(members)[None, :]
    pairs = Pairs(probes, members, similarity, same, ~same)
    blurred = similarity >= 0.3
    one = events_of(pairs, blurred, 1)
    assert set(np.round(one.strangers_blurred, 3)) == {round(1 / 3, 3)}, "s0 or s1, of s0, s1 and the other member"
    both = events_of(pairs, blurred, 2)
    assert both.strangers_mean == 1.0, "s0 and s1 are both blurred with a and b in the event"
    assert both.visible == 1 * len(both.strangers_blurred), "b's own face (0.1) is left visible in every event"
    assert events_of(pairs, blurred, 3) is None, "no event of three from two members"


def test_a_member_with_several_references_is_matched_at_their_best_and_none_is_their_own_face():
    references = [probe("a", "a1", [1, 0]), probe("a", "a2", [0, 1])]
    probes = [*references, probe("a", "a3", [0.6, 0.8]), probe("s", "s", [0.8, -0.6])]
    pairs = Pairs.of(probes, {"a": references})
    assert pairs.similarity[:, 0] == pytest.approx([1.0, 1.0, 0.8, 0.8])
    assert pairs.genuine[:, 0].tolist() == [False, False, True, False]
    assert pairs.stranger[:, 0].tolist() == [False, False, False, True]
    assert not pairs.leaving_out({Path("a3")}).genuine.any()


def test_no_recommendation_says_why():
    own = [probe("a", "a1", [1]), probe("a", "a2", [1])]
    no_strangers = Pairs(own, ["a"], np.array([[0.9], [0.8]], dtype=np.float32), *_member_a(2, strangers=0))
    with pytest.raises(NoRecommendation, match="no stranger pair"):
        recommend(no_strangers)
    for stranger, why in ((0.02, "under every blur threshold of the grid"), (0.5, "no combination of the grid")):
        similarity = np.array([[0.9], [0.8], [stranger]], dtype=np.float32)
        with pytest.raises(NoRecommendation, match=why):
            recommend(Pairs([*own, probe("s", "s", [1])], ["a"], similarity, *_member_a(2, strangers=1)))
    # Every poor-face threshold above every blur: none fits.
    upside_down = replace(RULE, grid=Grid(blurs=(0.15,), poor_blurs=(0.20,)))
    similarity = np.array([[0.9], [0.8], [0.3]], dtype=np.float32)
    with pytest.raises(NoRecommendation, match="no combination of the grid"):
        recommend(Pairs([*own, probe("s", "s", [1])], ["a"], similarity, *_member_a(2, strangers=1)), upside_down)


def _member_a(own: int, strangers: int) -> tuple[np.ndarray, np.ndarray]:
    """(genuine, stranger) of `own` photos of member a (the first their reference) and then `strangers`."""
    genuine = np.array([[0 < i < own] for i in range(own + strangers)])
    return genuine, np.array([[i >= own] for i in range(own + strangers)])


def test_z_norm_takes_out_how_easily_strangers_reach_a_reference():
    """Every stranger's face leans towards member a's reference: raw, a's strangers score higher than b's; Z-norm
    (each half's pairs against a cohort of the other half's faces) puts both references' strangers near 0."""
    from faces.measurement.calibration import normalised

    rng = np.random.default_rng(0)
    a, b = np.eye(512, dtype=np.float32)[0], np.eye(512, dtype=np.float32)[1]
    references = {"a": probe("a", "a0", a), "b": probe("b", "b0", b)}
    strangers = []
    for i in range(200):
        vector = rng.normal(size=512).astype(np.float32)
        vector /= np.linalg.norm(vector)
        vector = 0.3 * a + vector
        strangers.append(probe(f"s{i}", f"s{i}", vector / np.linalg.norm(vector)))
    pairs = Pairs.of(strangers, references)
    raw = pairs.similarity
    assert raw[:, 0].mean() - raw[:, 1].mean() > 0.2, "a's strangers reach a"
    scores, within = normalised(pairs, references)
    for column in range(2):
        scored = scores["Z-norm"][within[:, column], column]
        assert len(scored) > 50
        assert abs(scored.mean()) < 0.25, "after Z-norm a stranger sits near the cohort's mean, for a as for b"


def test_a_stranger_another_member_explains_is_blurred_for_no_dnp_member():
    """Stranger s reaches member a at 0.3 and is matched to member b at 0.9: with b a member of the event (and not
    DNP), s is b's face, blurred nowhere; in an event where b is DNP too, nothing explains s."""
    members = ["a", "b"]
    probes = [probe("b", "s", [1]), probe("a", "a2", [1])]
    similarity = np.array([[0.3, 0.9], [0.9, 0.0]], dtype=np.float32)
    pairs = Pairs(
        probes, members, similarity, np.array([[False, False], [True, False]]), np.array([[True, False], [False, True]])
    )
    thresholds = Thresholds(match=0.4, blur=0.2, cluster=0.4, explained_lead=0.3)
    assert blurred(pairs, thresholds)[0].tolist() == [True, True]
    assert blurred_among_members(pairs, thresholds)[0].tolist() == [False, True]
    assert explained(pairs, thresholds, [0]).tolist() == [True, False]
    assert explained(pairs, thresholds, [0, 1]).tolist() == [False, False]
    lone = events_of(
        pairs, blurred(pairs, thresholds), 1, explained=lambda columns: explained(pairs, thresholds, columns)
    )
    assert lone.strangers_mean == 0.0, (
        "with a alone DNP, s is b's and a's own face is a stranger's to b: neither is blurred"
    )
    assert lone.visible == 0, "a's own face stays blurred"
