"""The chaos run, reduced: every fault kind once, a small hostile queue, zero violations.

The full run is `python bench/chaos.py --seed N` (a few hundred jobs, 14 faults); the code is in tests/chaos/.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT_KINDS = ("kill", "terminate_backend", "pg_restart", "s3_outage", "second_worker", "sweep_orphans")
HOSTILE_REASONS = ("bad_message", "unknown_job", "missing_object", "undecodable_image", "image_too_large")
MEDIA_REASONS = ("unsupported_media", "media_too_large", "undecodable_media")  # pages, a GIF too long, a cut MP4


def reduced_run(tmp_path: Path) -> dict:
    """bench/chaos.py, reduced; its JSON report (the same with --report and in the --keep folder)."""
    result = subprocess.run(
        [
            sys.executable,
            "bench/chaos.py",
            "--seed", "7",
            "--events", "2",
            "--photos-per-event", "3",
            "--faults", "6",
            "--fault-gap", "1.0", "2.5",
            "--sweep-retry-s", "2",
            "--full-sweep-s", "10",
            "--keep", str(tmp_path / "run"),
            "--report", str(tmp_path / "report.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report == json.loads((tmp_path / "run" / "report.json").read_text())
    return report


def test_the_reduced_chaos_run_keeps_every_invariant(tmp_path):
    report = reduced_run(tmp_path)
    figures, invariants = report["figures"], report["invariants"]
    assert report["total_violations"] == 0
    for kind in FAULT_KINDS:
        assert report["faults"][kind] >= 1, f"{kind} was not injected"
    # A fault during a hostile message's three tries archives it as `failed` instead of its own
    # reason (invariant 1 still holds): its own reason shows whenever the faults spared it.
    missing = {reason for reason in HOSTILE_REASONS + MEDIA_REASONS if reason not in report["archived"]}
    assert not missing or "failed" in report["archived"], missing
    assert len(missing) <= 2, f"the faults hid too many hostile inputs: {missing}"
    assert isinstance(report["orphans"]["survived_at_most_s"], float)
    assert isinstance(figures["edge_cut_faces"], int)
    # Animations and videos are processed: published as rendered files, checked frame by frame.
    assert figures["clip_jobs_ended"].get("completed", 0) >= 1
    assert figures["media_faces_checked"] >= 1
    assert figures["media_files_checked"] >= 1
    assert invariants["CLIPS_RENDERED"] == {"display": "2. no multi-frame upload published as itself", "violations": 0}
    # Stills with more than one picture in their bytes, or turned: run through the engine, file by file.
    assert figures["rendered_still_files"] >= 1
    assert len(invariants) == 17
    assert invariants["NONE_ARCHIVED_FOR_AN_OUTAGE"]["violations"] == 0
    assert report["archived_for_outage"] == 0
    assert all(invariant["violations"] == 0 for invariant in invariants.values())
    assert invariants["ONE_READER_AT_A_TIME"]["violations"] == 0
    # A member turned on Do Not Publish mid-run: hidden in one job, whatever the queue held.
    assert figures["dnp_change_photos"] >= 1
    assert figures["dnp_hide_committed_s"] is not None
    assert figures["readers_at_once_tries"] >= 1
