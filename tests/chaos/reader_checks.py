"""Readers at once: no photo handled by two readers where its row lock cannot keep them apart; and how long a
killed reader's message waited before another read."""

from collections import defaultdict

from tests.chaos.worker_logs import CLOCK_SLACK_S, Try, photo_tries, try_start


def readers_at_once(chaos, lines: list[dict]) -> int:
    """Pairs of tries on one photo by two worker processes whose times overlap (beyond the clock slack), where
    the photo's row lock cannot have kept them apart: the same message twice at once (a reader read a message
    another still ran), or a try that lost its session (its row lock) while it ran. The tries are the workers'
    own (worker_logs.photo_tries) and those the harness cut short by SIGKILL (from pgmq's last_read_at to the
    kill).

    Two tries of different messages on one photo, each holding its session to its end, may overlap: every
    photo job starts by locking the photo's row (SELECT ... FOR UPDATE), so the later one waits, inside its
    try, until the earlier one commits or rolls back. Those are counted in a note, not as violations."""
    by_photo: dict[str, list[Try]] = defaultdict(list)
    for attempt in chaos.faults.killed_tries + photo_tries(lines, chaos.faults.windows):
        by_photo[attempt.photo_id].append(attempt)
    pairs = [pair for tries in by_photo.values() for pair in overlapping(tries)]
    violations = [(first, second) for first, second in pairs if unguarded(first, second)]
    chaos.report.notes += [two_at_once(first, second) for first, second in violations]
    figures = chaos.report.figures
    figures.readers_at_once_tries = sum(len(tries) for tries in by_photo.values())
    figures.readers_at_once_photos = len(by_photo)
    figures.overlapping_pairs, figures.serialised_pairs = len(pairs), len(pairs) - len(violations)
    chaos.report.notes.append(
        f"readers at once: {figures.readers_at_once_tries} tries on {len(by_photo)} photos (ends from the workers' "
        f"log lines, starts = end - ms, kills from the harness; one host clock, {CLOCK_SLACK_S * 1000:.0f} ms "
        f"slack); {len(pairs)} pairs by two processes overlapped, {figures.serialised_pairs} of them different "
        f"messages kept apart by the photo's row lock"
    )
    return len(violations)


def overlapping(tries: list[Try]) -> list[tuple[Try, Try]]:
    """The pairs of one photo's tries by two processes whose times overlap beyond the clock slack."""
    tries = sorted(tries, key=lambda attempt: attempt.start)
    pairs = []
    for index, first in enumerate(tries):
        for second in tries[index + 1 :]:
            if second.start >= first.end - CLOCK_SLACK_S:
                break
            if second.worker != first.worker:
                pairs.append((first, second))
    return pairs


def unguarded(first: Try, second: Try) -> bool:
    """The photo's row lock did not keep them apart: the same message, or a try lost its session."""
    return first.msg_id == second.msg_id or first.lost_session or second.lost_session


def two_at_once(first: Try, second: Try) -> str:
    overlap = min(first.end, second.end) - second.start
    why = "same message" if first.msg_id == second.msg_id else "a try lost its session"
    return (
        f"two readers at once on photo {first.photo_id} ({why}, {overlap * 1000:.0f} ms): {first.worker} msg "
        f"{first.msg_id} ({first.how}) and {second.worker} msg {second.msg_id} ({second.how})"
    )


def abandoned_waits(chaos, lines: list[dict]) -> list[float | None]:
    """Per abandoned message, seconds from the kill to its next read: pgmq's last_read_at as the monitor saw it;
    for one deleted between two looks, the start of its next try in the workers' lines (end - ms)."""
    waits = []
    for entry in chaos.faults.abandoned:
        read_again = entry.read_again_at
        if read_again is None:
            starts = [
                try_start(fields)
                for fields in lines
                if fields.get("msg_id") == str(entry.msg_id)
                and fields.get("try") == str(entry.read_ct + 1)
                and "ms" in fields
            ]
            read_again = min(starts, default=None)
        waits.append(None if read_again is None else read_again - entry.killed_at)
        chaos.report.notes.append(
            f"kill of {entry.worker} mid-job: msg {entry.msg_id} (try {entry.read_ct}) "
            + ("never read again" if read_again is None else f"read again {read_again - entry.killed_at:.1f} s later")
        )
    return waits
