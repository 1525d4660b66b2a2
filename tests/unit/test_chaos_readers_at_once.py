"""Invariant 6 of the chaos run (tests/chaos/reader_checks.py), on worker lines made here: a try cut off from
its session may run beside another reader's try on its photo, as long as no row names what it uploaded and the
sweeps deleted it; one message run by two readers that both held their sessions is always a violation."""

import uuid
from datetime import datetime
from types import SimpleNamespace

from tests.chaos.reader_checks import readers_at_once
from tests.chaos.report import Figures

PHOTO = str(uuid.uuid4())
EVENT = str(uuid.uuid4())
FOLDER = f"events/{EVENT}/photos/{PHOTO}/v2.0badc0de/"
T0 = datetime(2026, 12, 2, 12, 0, 0).timestamp()


def line(worker: str, event: str, at: float, **fields) -> dict:
    stamp = datetime.fromtimestamp(T0 + at).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    return {"event": event, "asctime": stamp, "worker": worker, "photo_id": PHOTO, **fields}


def cut_off_beside_a_live_try() -> list[dict]:
    """Worker a's try of msg 1 (0-1.0 s) lost its session at 0.5 s after it began uploading; worker b read msg 1
    again at 0.6 s and committed at 1.5 s."""
    return [
        line("a", "render_folder", 0.4, folder=FOLDER),
        line("a", "db_lost", 1.0, msg_id="1", ms="1000"),
        line("b", "render_folder", 1.2, folder=FOLDER.replace("0badc0de", "600dc0de")),
        line("b", "job_done", 1.5, msg_id="1", ms="900"),
    ]


def check(lines: list[dict], *, named=(), left=()) -> tuple[int, SimpleNamespace]:
    chaos = SimpleNamespace(
        faults=SimpleNamespace(killed_tries=[], windows=[]),
        report=SimpleNamespace(notes=[], figures=Figures()),
        watch=SimpleNamespace(named_etags={key: "etag" for key in named}),
    )
    snapshot = SimpleNamespace(rows={}, keys=list(left))
    return readers_at_once(chaos, lines, snapshot), chaos


def test_a_cut_off_try_beside_a_live_one_is_no_violation_when_its_folder_is_unnamed_and_swept():
    violations, chaos = check(cut_off_beside_a_live_try())
    assert violations == 0
    assert (chaos.report.figures.cut_off_pairs, chaos.report.figures.cut_off_folders) == (1, 1)


def test_a_cut_off_try_s_folder_left_after_the_sweeps_is_a_violation():
    violations, chaos = check(cut_off_beside_a_live_try(), left=[FOLDER + "public.jpg"])
    assert violations == 1
    assert any("left after the sweeps" in note for note in chaos.report.notes)


def test_a_cut_off_try_s_folder_named_by_a_row_is_a_violation():
    violations, chaos = check(cut_off_beside_a_live_try(), named=[FOLDER + "public_thumb.jpg"])
    assert violations == 1
    assert any("a row named it" in note for note in chaos.report.notes)


def test_one_message_run_by_two_readers_on_their_sessions_is_a_violation():
    lines = [line("a", "job_done", 1.0, msg_id="1", ms="1000"), line("b", "job_done", 1.5, msg_id="1", ms="900")]
    assert check(lines)[0] == 1


def test_two_messages_on_one_photo_one_after_the_other_on_its_row_lock_are_no_violation():
    lines = [line("a", "job_done", 1.0, msg_id="1", ms="1000"), line("b", "job_done", 1.5, msg_id="2", ms="900")]
    violations, chaos = check(lines)
    assert violations == 0
    assert chaos.report.figures.serialised_pairs == 1
