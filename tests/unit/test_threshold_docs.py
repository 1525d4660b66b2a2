"""The thresholds in the docs are the committed ones, the committed ones are the line measure_thresholds recommended
(docs/MEASUREMENTS.md, "Recognition on real people"), and the rule behind that line does what it says."""

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from faces.measurement.probes import AS_TAKEN, Probe
from faces.measurement.recommend import RULE, Grid, clear_match, explained_lead, for_goals, recommend
from faces.measurement.verdicts import Pairs
from faces.thresholds import THRESHOLDS, FaceQuality, Thresholds

MEASUREMENTS = Path(__file__).resolve().parents[2] / "docs" / "MEASUREMENTS.md"
BUFFALO_S = THRESHOLDS["insightface-buffalo_s"]
FIELDS = (
    "match",
    "blur",
    "poor_face_blur",
    "turned_face",
    "weak_norm",
    "unsure_norm",
    "cluster",
    "cluster_merge",
    "clear_match",
    "clear_norm",
    "explained_lead",
    "link",
)


def thresholds_section() -> str:
    text = MEASUREMENTS.read_text()
    start = text.index("### Thresholds (`faces/thresholds.py`)")
    return text[start : text.index("\n## ", start)]


def test_the_thresholds_table_is_the_committed_values():
    rows = [line for line in thresholds_section().splitlines() if line.startswith("| `insightface-")]
    cells = {
        row.split("|")[1].strip(): [cell.strip() for cell in row.strip().strip("|").split("|")[1:]] for row in rows
    }
    assert [float(cell) for cell in cells["`insightface-buffalo_s`"]] == [getattr(BUFFALO_S, name) for name in FIELDS]
    assert set(cells["`insightface-buffalo_l`"]) == {"not measured"}
    assert not THRESHOLDS["insightface-buffalo_l"].measured


def test_every_threshold_the_docs_name_is_the_committed_one():
    text = MEASUREMENTS.read_text()
    named = re.findall(rf"`({'|'.join(FIELDS)})` = (\d+(?:\.\d+)?)", text)
    assert {name for name, _ in named} == set(FIELDS)
    for name, value in named:
        assert float(value) == getattr(BUFFALO_S, name), name
    recommended = re.search(r"^Recommended: (Thresholds\(.*\))$", thresholds_section(), flags=re.M)[1]
    assert eval(recommended, {"Thresholds": Thresholds, "inf": math.inf}) == BUFFALO_S


def probe(person: str, similarity_image: str, *, norm: float = 24.0, turn: float = 0.0, width: float = 100.0):
    return Probe(
        person, Path(similarity_image), AS_TAKEN, np.zeros(4), 0.8, np.zeros(512), FaceQuality(width, turn, norm)
    )


def pairs_of(rows: list[tuple[Probe, list[float]]], members: list[str]) -> Pairs:
    """Pairs with the similarities given (each probe against each member), not computed from embeddings."""
    probes = [one for one, _ in rows]
    person = np.array([one.person for one in probes])[:, None]
    same = person == np.array(members)[None, :]
    return Pairs(probes, members, np.array([s for _, s in rows], dtype=np.float32), same, ~same)


SMALL_RULE = replace(
    RULE,
    grid=Grid(
        unsure_norms=(0.0, 16.0),
        weak_norms=(0.0, 21.0),
        turned_faces=(0.5, math.inf),
        blurs=(0.20, 0.30),
        poor_blurs=(0.10, 0.20, 0.30),
    ),
)


def test_the_rule_lowers_the_threshold_where_members_are_seen_poorly_within_the_strangers_budget():
    """A's turned face reaches its reference at 0.15 and B's weak face at 0.12: the rule finds the shape that
    blurs both, as long as strangers seen as poorly stay within the budget."""
    rows = [
        (probe("a", "a1.jpg"), [0.60, 0.05]),
        (probe("a", "a2.jpg", turn=0.6), [0.15, 0.02]),
        (probe("b", "b1.jpg"), [0.02, 0.55]),
        (probe("b", "b2.jpg", norm=19.0), [0.01, 0.12]),
    ]
    # Strangers (a group of people who are neither): few of them are seen poorly and none come close, but one
    # who looks like B (which puts match at 0.40).
    rows += [(probe(f"s{i}", f"s{i}.jpg", turn=0.6 if i < 2 else 0.0), [0.05, 0.04]) for i in range(120)]
    rows.append((probe("lookalike", "l.jpg"), [0.05, 0.35]))
    asked = []
    chosen, found = recommend(
        pairs_of(rows, ["a", "b"]), SMALL_RULE, cluster=lambda unsure: asked.append(unsure) or (0.33, 0.38)
    )
    assert found.visible == 0, "both poorly seen faces are blurred"
    assert chosen.poor_face_blur == 0.10
    assert chosen.turned_face == 0.5
    assert chosen.weak_norm == 21.0
    assert chosen.blur == 0.30, "faces seen well keep the higher threshold: no face of a member needs less"
    assert (chosen.cluster, chosen.cluster_merge) == (0.33, 0.38), (
        "measured on the clusters, for the faces the chosen unsure_norm judges"
    )
    assert asked == [chosen.unsure_norm]


def test_the_rule_leaves_a_face_visible_rather_than_blur_strangers_past_the_budget():
    rows = [(probe("a", "a1.jpg"), [0.60]), (probe("a", "a2.jpg", norm=19.0), [0.15])]
    # Every stranger is seen as poorly and at 0.16: blurring A's face at 0.15 would blur all of them.
    rows += [(probe(f"s{i}", f"s{i}.jpg", norm=19.0), [0.16]) for i in range(40)]
    chosen, found = recommend(pairs_of(rows, ["a"]), SMALL_RULE)
    assert found.visible == 1
    assert found.strangers_mean == 0.0
    assert chosen.lowest_blur > 0.16


def test_match_sits_above_every_stranger_pair():
    rows = [(probe("a", "a1.jpg"), [0.9]), (probe("a", "a2.jpg"), [0.8]), (probe("s", "s.jpg"), [0.373])]
    rows += [(probe(f"s{i}", f"s{i}.jpg"), [0.0]) for i in range(120)]
    chosen, _ = recommend(pairs_of(rows, ["a"]), SMALL_RULE)
    assert chosen.match == 0.40  # 0.373 + 0.025, up to a step of 0.05


def test_the_budget_is_the_one_that_keeps_an_event_of_five_within_its_goal():
    """Each of five members has a hard face at 0.16, and two strangers of their own reach them at 0.17: blurring
    the hard faces costs 2 % of strangers per member (within a 2.5 % budget), but 10 % in the event of all five.
    The goals' budget leaves the hard faces visible instead."""
    members = ["a", "b", "c", "d", "e"]
    rows = []
    for column, member in enumerate(members):
        rows.append((probe(member, f"{member}1.jpg"), [0.6 if i == column else 0.0 for i in range(5)]))
        rows.append((probe(member, f"{member}2.jpg"), [0.16 if i == column else 0.0 for i in range(5)]))
    for i in range(100):
        reached = i // 2 if i < 10 else None
        rows.append((probe(f"s{i}", f"s{i}.jpg"), [0.17 if column == reached else 0.0 for column in range(5)]))
    pairs = pairs_of(rows, members)
    grid = Grid(
        unsure_norms=(0.0,), weak_norms=(0.0,), turned_faces=(math.inf,), blurs=(0.15, 0.16, 0.18), poor_blurs=(0.10,)
    )
    fixed, _ = recommend(pairs, replace(RULE, grid=grid))
    assert fixed.blur <= 0.16, "at a fixed 2.5 % per member the hard faces are blurred"
    chosen, found, budget = for_goals(pairs, replace(RULE, grid=grid))
    assert chosen.blur == 0.18
    assert found.visible == 5
    assert budget < 0.02


def test_clear_faces_get_their_own_match_threshold_where_it_finds_more_members():
    """Strangers seen clearly (norm 22 and up) reach a member at most 0.30, the weaker ones 0.36: `match` is 0.40
    and `clear_match` 0.35 from norm 22, which finds a's clear face at 0.37; from norm 21 the weak stranger's 0.36
    would count, and nothing would be lower."""
    rows = [
        (probe("a", "a1.jpg", norm=25.0), [0.90, 0.05]),
        (probe("a", "a2.jpg", norm=23.0), [0.37, 0.02]),
        (probe("a", "a3.jpg", norm=21.5), [0.38, 0.02]),
        (probe("b", "b1.jpg"), [0.02, 0.85]),
        (probe("b", "b2.jpg", norm=21.5), [0.36, 0.60]),
        (probe("b", "b3.jpg", norm=24.0), [0.30, 0.70]),
    ]
    pairs = pairs_of(rows, ["a", "b"])
    rule = replace(SMALL_RULE, grid=replace(SMALL_RULE.grid, clear_norms=(21.0, 22.0)))
    assert clear_match(pairs, rule, 0.40) == (0.35, 22.0)
    assert clear_match(pairs, rule, 0.35) == (None, math.inf), "nothing under match"


def test_explained_lead_sits_above_every_lead_another_reference_takes_over_a_members_own():
    """a's turned face reaches b's reference 0.27 higher than a's own; a face too poorly seen to judge (norm 12)
    leads by more, but such a face is never explained, so it does not count."""
    rows = [
        (probe("a", "a1.jpg"), [0.90, 0.05]),
        (probe("a", "a2.jpg", turn=0.6), [0.03, 0.30]),
        (probe("a", "a3.jpg", norm=12.0), [0.00, 0.50]),
        (probe("b", "b1.jpg"), [0.02, 0.85]),
        (probe("b", "b2.jpg"), [0.10, 0.60]),
    ]
    shape = Thresholds(match=0.40, blur=None, cluster=None, unsure_norm=15)
    assert explained_lead(pairs_of(rows, ["a", "b"]), SMALL_RULE, shape) == 0.30  # 0.27 + 0.025, up to 0.05
