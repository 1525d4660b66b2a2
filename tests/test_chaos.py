"""The chaos run, reduced: every fault kind once, a small hostile queue, zero violations.

The full run is `python bench/chaos.py --seed N` (a few hundred jobs, 14 faults).
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_reduced_chaos_run_keeps_every_invariant(tmp_path):
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
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    table = result.stdout
    assert result.returncode == 0, table + result.stderr[-3000:]
    assert "total violations: 0" in table
    for kind in ("kill", "terminate_backend", "pg_restart", "s3_outage", "second_worker", "sweep_orphans"):
        assert re.search(rf"\| fault: {kind} \| [1-9]", table), f"{kind} was not injected"
    reasons = ("bad_message", "unknown_job", "missing_object", "undecodable_image", "image_too_large")
    archived_as = set(re.findall(r"^\| archived: (\w+) \|", table, re.M))
    # A fault during a hostile message's three tries archives it as `failed` instead of its own
    # reason (invariant 1 still holds): its own reason shows whenever the faults spared it.
    media = ("unsupported_media", "media_too_large", "undecodable_media")  # pages, a GIF too long, a cut MP4
    missing = {reason for reason in (*reasons, *media) if reason not in archived_as}
    assert not missing or "failed" in archived_as, missing
    assert len(missing) <= 2, f"the faults hid too many hostile inputs: {missing}"
    assert re.search(r"^\| orphan survived at most, s \| \d+\.\d \|$", table, re.M)
    assert "edge-cut DNP faces in published photos:" in table
    # Animations and videos are processed: published as rendered files, checked frame by frame.
    assert re.search(r"^note: multi-frame uploads: \d+ clips, their jobs ended: completed [1-9]", table, re.M)
    assert re.search(r"^note: multi-frame DNP faces: [1-9]\d* \(file, frame, face\) checked", table, re.M)
    assert re.search(r"^note: multi-frame files: [1-9]\d* published files", table, re.M)
    assert "| 2. no multi-frame upload published as itself | 0 |" in table
    # Stills with more than one picture in their bytes, or turned: run through the engine, file by file.
    assert re.search(r"^note: rendered stills: [1-9]\d* published files run through the engine", table, re.M)
    invariants = re.findall(r"^\| (\d\. [^|]+) \| (\d+) \|$", table, re.M)
    assert len(invariants) == 15
    assert all(count == "0" for _, count in invariants)
    assert "| 6. no photo handled by two readers at once | 0 |" in table
    # A member turned on Do Not Publish mid-run: hidden in one job, whatever the queue held.
    assert re.search(r"^note: dnp change: [1-9]\d* photos show the member; the hide committed \d", table, re.M)
    assert re.search(r"^note: readers at once: [1-9]\d* tries", table, re.M)
