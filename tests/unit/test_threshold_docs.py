"""The thresholds in the docs are the committed ones, and the committed ones are what measure_thresholds' rule
makes of the measurement the docs print (docs/MEASUREMENTS.md, "Thresholds": the command's own per-size table)."""

import math
import re
from pathlib import Path

import pytest

from faces.management.commands.measure_thresholds import Condition, Row, recommend
from faces.thresholds import THRESHOLDS, Thresholds

MEASUREMENTS = Path(__file__).resolve().parents[2] / "docs" / "MEASUREMENTS.md"
BUFFALO_S = THRESHOLDS["insightface-buffalo_s"]
FIELDS = ("match", "blur", "small_face_blur", "cluster")


def thresholds_section() -> str:
    text = MEASUREMENTS.read_text()
    start = text.index("### Thresholds (`faces/thresholds.py`)")
    return text[start : text.index("\n## ", start)]


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first_cell}")
    ]


def test_the_thresholds_table_is_the_committed_values():
    (buffalo_s,) = table_rows(thresholds_section(), "`insightface-buffalo_s`")
    assert [float(cell) for cell in buffalo_s[1:]] == [
        BUFFALO_S.match,
        BUFFALO_S.blur,
        BUFFALO_S.small_face_blur,
        BUFFALO_S.cluster,
    ]
    (buffalo_l,) = table_rows(thresholds_section(), "`insightface-buffalo_l`")
    assert set(buffalo_l[1:]) == {"not measured"}
    assert not THRESHOLDS["insightface-buffalo_l"].measured


def test_every_threshold_the_docs_name_is_the_committed_one():
    text = MEASUREMENTS.read_text()
    named = re.findall(r"`(match|blur|small_face_blur|cluster)` = (\d\.\d+)", text)
    assert {name for name, _ in named} == set(FIELDS)
    for name, value in named:
        assert float(value) == getattr(BUFFALO_S, name), name
    for value in re.findall(r"`faces\.thresholds`: (\d\.\d+) for buffalo_s", text):
        assert float(value) == BUFFALO_S.blur
    recommended = re.search(r"^Recommended: (Thresholds\(.*\))$", thresholds_section(), flags=re.M)[1]
    assert eval(recommended, {"Thresholds": Thresholds}) == BUFFALO_S


def documented_rows() -> list[Row]:
    """The per-size table of §6 (measure_thresholds' output): each row's floor and highest impostor pair."""
    rows = []
    for cells in table_rows(thresholds_section(), ""):
        label = cells[0]
        if len(cells) != 13 or not re.match(r"^(full res|\d+ px)", label):
            continue  # another table's row
        size = None if label == "full res" else int(label.split()[0])
        sigma = re.search(r"blur sigma ([\d.]+)", label)
        jpeg = re.search(r"JPEG q(\d+)", label)
        condition = Condition(label, size, float(sigma[1]) if sigma else None, int(jpeg[1]) if jpeg else None)
        impostor_max, floor = float(cells[9]), float(cells[10])
        rows.append(Row(condition, genuine=[floor], impostor=[impostor_max]))
    return rows


def test_the_committed_thresholds_are_the_rule_applied_to_the_documented_measurement():
    rows = documented_rows()
    labels = [row.condition.label for row in rows]
    assert "full res" in labels
    assert "24 px" in labels
    assert any(row.condition.jpeg for row in rows), "the blurred, re-encoded 24 px faces are measured"
    recommended, _ = recommend(rows)
    assert recommended == BUFFALO_S


@pytest.mark.parametrize(
    ("impostor_max", "floors", "expected"),
    [
        # match: the highest impostor + 0.025, up to a step; blur: 0.10 below match; small: the small floor.
        (0.373, {None: 0.64, 32: 0.58, 24: 0.53, "24 blurred": 0.17}, (0.40, 0.30, 0.15, 0.45)),
        # A genuine floor of large faces under match - 0.10 caps blur (rounded down to a step).
        (0.373, {None: 0.64, 32: 0.27, 24: 0.53, "24 blurred": 0.17}, (0.40, 0.25, 0.15, 0.45)),
        # Small faces that embed as well as large ones still get no more than blur.
        (0.20, {None: 0.64, 32: 0.58, 24: 0.53}, (0.25, 0.15, 0.15, 0.30)),
    ],
)
def test_the_rule_on_a_small_fixture(impostor_max, floors, expected):
    rows = []
    for key, floor in floors.items():
        blurred = key == "24 blurred"
        size = 24 if blurred else key
        condition = Condition(str(key), size, 1.2 if blurred else None, 75 if blurred else None)
        rows.append(Row(condition, genuine=[floor], impostor=[impostor_max]))
    recommended, _ = recommend(rows)
    assert (recommended.match, recommended.blur, recommended.small_face_blur, recommended.cluster) == expected
    assert math.isclose(recommended.cluster - recommended.match, 0.05)
