"""The benches of the recognition work keep running: each on a tiny set of real photos the venv ships (Yao Ming
twice, Tom Hanks twice), the baseline revision being this one. Their figures come from the full runs
(docs/MEASUREMENTS.md); here only that each ends with its table."""

import subprocess
import sys
from pathlib import Path

import pytest

from faces.engines import resident_engine
from momentlens.devservices import samples

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny-set")
    team = samples.read(samples.vectron_image("players.jpg"))
    (root / "yao").mkdir()
    crop = samples.crop_around(team, samples.yao_ming_box(resident_engine()))
    (root / "yao" / "players_crop.jpg").write_bytes(samples.encode_jpeg(crop, quality=95))
    (root / "yao" / "yaoming.jpg").write_bytes(samples.vectron_image("yaoming.jpg").read_bytes())
    (root / "tom").mkdir()
    tom = samples.tom_hanks()
    (root / "tom" / "portrait.jpg").write_bytes(samples.encode_jpeg(tom, quality=95))
    (face,) = resident_engine().analyze(tom, small_faces=False)
    (root / "tom" / "closer.jpg").write_bytes(samples.encode_jpeg(samples.derived_portrait(tom, face.box)))
    return root


def bench(*args: str, timeout: int = 600) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


def test_turned_views(tiny_set):
    out = bench("bench/turned_views.py", str(tiny_set), "--glob", "*/*.jpg")
    assert "| 180° |" in out
    assert "the worker's rule (norm x 1.1):" in out


def test_dnp_visibility(tiny_set):
    out = bench("bench/dnp_visibility.py", str(tiny_set), "--photos-per-person", "1", "--baseline", "HEAD")
    assert "| baseline (HEAD) | 2/2 |" in out, "each event's one photo published"
    assert "| this tree | 2/2 |" in out


def test_job_cost():
    out = bench("bench/job_cost.py", "--photos", "1", "--rounds", "1", "--megapixels", "1", "--baseline", "HEAD")
    assert "| this tree | 1 |" in out
