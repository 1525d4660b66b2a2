"""The arithmetic of faces/measurement/people.py: BCubed, the worker's clustering rule replayed, Immich's DBSCAN,
the cluster threshold's rule, and what matching finds. Embeddings here are made to order; the figures on real
people are docs/MEASUREMENTS.md's ("Who is in a photo")."""

from pathlib import Path

import numpy as np
import pytest

from faces.measurement import people
from faces.measurement.probes import AS_TAKEN, Probe
from faces.measurement.verdicts import Pairs
from faces.thresholds import FaceQuality, Thresholds


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(512, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def test_bcubed_scores_each_face_by_its_cluster_and_its_person():
    score = people.bcubed(np.array(["a", "a", "b", "b"]), np.array([0, 0, 0, 1]))
    assert score.precision == pytest.approx((2 / 3 + 2 / 3 + 1 / 3 + 1) / 4)
    assert score.recall == pytest.approx((1 + 1 + 1 / 2 + 1 / 2) / 4)
    assert score.clusters == 2
    assert people.bcubed(np.array(["a", "b"]), np.array([0, 1])).f1 == 1.0


def test_the_worker_rule_joins_the_nearest_centroid_at_the_threshold_in_arrival_order():
    # b is 0.6 from a; c is 0.8 from b but 0.0 from a: c is judged against the centroid of a and b (0.447).
    faces = np.array([unit(1, 0, 0), unit(0.6, 0.8, 0), unit(0, 1, 0), unit(0, 0, 1)])
    assert people.worker_clusters(faces, 0.4).tolist() == [0, 0, 0, 1]
    assert people.worker_clusters(faces, 0.5).tolist() == [0, 0, 1, 2], "not b's 0.8: the centroid's 0.447"
    assert people.worker_clusters(faces, 0.9).tolist() == [0, 1, 2, 3]


def test_the_worker_rule_merges_a_cluster_that_came_near_another_into_the_older():
    # b is 0.30 from a: its own cluster. c joins a (0.64, b 0.46); a and c's centroid is then 0.42 from b.
    faces = np.array([unit(1, 0, 0), unit(0.30, 0.954, 0), unit(0.64, 0.281, 0.715), unit(0, 0, 0, 1)])
    assert people.worker_clusters(faces, 0.35).tolist() == [0, 1, 0, 2]
    assert people.worker_clusters(faces, 0.35, merge=0.40).tolist() == [0, 0, 0, 2], "b's cluster merged into a's"
    assert people.worker_clusters(faces, 0.35, merge=0.45).tolist() == [0, 1, 0, 2]


def test_immich_dbscan_needs_three_faces_within_the_distance_for_a_core():
    faces = np.array([unit(1, 0.05 * i) for i in range(3)] + [unit(0, 1, 0), unit(0, 0.95, 0.3)])
    labels = people.immich_clusters(faces)
    assert labels[0] == labels[1] == labels[2]
    assert len({labels[3], labels[4], labels[0]}) == 3, "two alike faces are no core: each its own cluster"


def probe(person: str, embedding: np.ndarray, norm: float = 24.0) -> Probe:
    return Probe(person, Path(f"{person}.jpg"), AS_TAKEN, np.zeros(4), 0.9, embedding, FaceQuality(100.0, 0.0, norm))


def test_the_cluster_threshold_is_the_loosest_pure_one_a_step_stricter():
    """Two people of one source whose faces are about 0.235 alike (look-alikes): at 0.20 and 0.22 the worker joins
    them, from 0.25 never; the rule keeps 0.28. Their clusters' centroids stay 0.235 apart, so merging them is pure from
    0.28: the rule keeps 0.30. A face too poorly seen is left out."""
    a = [probe("src-a", unit(1, 0, 0.02 * i)) for i in range(3)]
    b = [probe("src-b", unit(0.235, 0.972, 0.02 * i)) for i in range(3)]
    poor = probe("src-c", unit(0.5, 0.5, 0), norm=10.0)
    assert people.recommended_cluster([*a, *b, poor], unsure_norm=15.0) == (0.28, 0.30)
    events = people.cluster_events([*a, *b, poor], 15.0, seed=1)
    assert [(event.name, len(event.people)) for event in events] == [("src", 6)]


def test_matching_finds_the_most_similar_member_at_match_and_counts_a_stranger_it_names():
    probes = [probe("a", unit(1)), probe("a", unit(1)), probe("b", unit(1)), probe("s", unit(1))]
    similarity = np.array([[0.9, 0.1], [0.3, 0.2], [0.5, 0.6], [0.45, 0.1]], dtype=np.float32)
    person = np.array([one.person for one in probes])[:, None]
    same = person == np.array(["a", "b"])[None, :]
    pairs = Pairs(probes, ["a", "b"], similarity, same, ~same)
    result = people.found(pairs, Thresholds(match=0.4, blur=None, cluster=None), np.ones(4, dtype=bool))
    assert (result.own, result.faces, result.wrong) == (2, 3, 1), "a's first face and b's; the stranger named a"


def test_a_stranger_pair_at_the_faces_own_match_threshold_names_a_guest_who_is_no_member():
    clear, weak = FaceQuality(100.0, 0.0, 24.0), FaceQuality(100.0, 0.0, 18.0)
    probes = [
        Probe("s", Path("s1.jpg"), AS_TAKEN, np.zeros(4), 0.9, unit(1), clear),
        Probe("t", Path("t1.jpg"), AS_TAKEN, np.zeros(4), 0.9, unit(1), weak),
    ]
    similarity = np.array([[0.37], [0.37]], dtype=np.float32)
    pairs = Pairs(probes, ["a"], similarity, np.zeros((2, 1), bool), np.ones((2, 1), bool))
    thresholds = Thresholds(match=0.40, blur=0.18, cluster=0.35, clear_match=0.35, clear_norm=21)
    assert people.strangers_named(pairs, thresholds) == 1, "the clear face at 0.37 reaches 0.35; the weak one not 0.40"
