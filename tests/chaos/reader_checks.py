"""Readers at once: no photo written by two readers at once; and how long a killed reader's message waited before
another read."""

from collections import defaultdict

from tests.chaos.worker_logs import CLOCK_SLACK_S, Try, log_time, photo_tries, try_start


def readers_at_once(chaos, lines: list[dict], snapshot) -> int:
    """Two readers writing one photo at once: pairs of tries on one photo by two worker processes whose times
    overlap (beyond the clock slack) where neither lost its session (the same message read twice while both
    ran), and every object a try cut off from its session uploaded that a row named or the sweeps left. The tries
    are the workers' own (worker_logs.photo_tries) and those the harness cut short by SIGKILL (from pgmq's
    last_read_at to the kill).

    Two tries of different messages on one photo, each holding its session to its end, may overlap: every
    photo job starts by locking the photo's row (SELECT ... FOR UPDATE), so the later one waits, inside its
    try, until the earlier one commits or rolls back. A try whose session ended while it ran (its row lock
    with it) may overlap another reader's try, old message or new, for as long as it runs to its next
    checkpoint: it can commit nothing (its transaction was on that session), and what it uploads lies in its
    own folder (faces/rendering/files.py, `render_keys`), which no row may name and the sweeps must delete. Those
    pairs are counted in a note, and the cut-off try's folders checked."""
    by_photo: dict[str, list[Try]] = defaultdict(list)
    for attempt in chaos.faults.killed_tries + photo_tries(lines, chaos.faults.windows):
        by_photo[attempt.photo_id].append(attempt)
    pairs = [pair for tries in by_photo.values() for pair in overlapping(tries)]
    read_twice = [(first, second) for first, second in pairs if same_message_both_live(first, second)]
    cut_off = [pair for pair in pairs if pair[0].lost_session or pair[1].lost_session]
    # A try that ended in db_lost never committed; one that ran across a session fault and then logged its end
    # committed before the fault (a commit needs its session), so its folder is rightly named.
    folders = cut_off_folders(lines, [attempt for pair in cut_off for attempt in pair if attempt.how == "db_lost"])
    kept = kept_folders(chaos, folders, snapshot)
    chaos.report.notes += [two_at_once(first, second) for first, second in read_twice]
    chaos.report.notes += [f"a cut-off try's folder {folder}: {why}" for folder, why in kept]
    figures = chaos.report.figures
    figures.readers_at_once_tries = sum(len(tries) for tries in by_photo.values())
    figures.readers_at_once_photos = len(by_photo)
    figures.overlapping_pairs, figures.cut_off_pairs = len(pairs), len(cut_off)
    figures.serialised_pairs = len(pairs) - len(read_twice) - len(cut_off)
    figures.cut_off_folders = len(folders)
    chaos.report.notes.append(
        f"readers at once: {figures.readers_at_once_tries} tries on {len(by_photo)} photos (ends from the workers' "
        f"log lines, starts = end - ms, kills from the harness; one host clock, {CLOCK_SLACK_S * 1000:.0f} ms "
        f"slack); {len(pairs)} pairs by two processes overlapped: {figures.serialised_pairs} different messages "
        f"kept apart by the photo's row lock, {len(cut_off)} beside a try cut off from its session, whose "
        f"{len(folders)} render folders no row named and the sweeps emptied ({len(kept)} not)"
    )
    return len(read_twice) + len(kept)


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


def same_message_both_live(first: Try, second: Try) -> bool:
    """One message run by two readers at once, each on its own session: a read while the other still ran it."""
    return first.msg_id == second.msg_id and not (first.lost_session or second.lost_session)


def cut_off_folders(lines: list[dict], tries: list[Try]) -> set[str]:
    """The render folders (the `render_folder` lines, faces/rendering/files.py) the cut-off tries wrote in: each
    line of the try's worker, on its photo, within its time."""
    return {
        fields["folder"]
        for fields in lines
        if fields["event"] == "render_folder"
        for attempt in tries
        if fields["worker"] == attempt.worker
        and fields.get("photo_id", "").lower() == attempt.photo_id
        and attempt.start - CLOCK_SLACK_S <= log_time(fields) <= attempt.end + CLOCK_SLACK_S
    }


def kept_folders(chaos, folders: set[str], snapshot) -> list[tuple[str, str]]:
    """(folder, why) for each cut-off try's folder that a row named (in any sample of the run, or at its end) or
    that still holds an object once the workers had their sweeps."""
    named = set(chaos.watch.named_etags) | {key for row in snapshot.rows.values() for key in row.named}
    kept = []
    for folder in sorted(folders):
        if any(key.startswith(folder) for key in named):
            kept.append((folder, "a row named it"))
        elif any(key.startswith(folder) for key in snapshot.keys):
            kept.append((folder, "left after the sweeps"))
    return kept


def two_at_once(first: Try, second: Try) -> str:
    overlap = min(first.end, second.end) - second.start
    return (
        f"two readers at once on photo {first.photo_id} (the same message, both on their sessions, "
        f"{overlap * 1000:.0f} ms): {first.worker} msg {first.msg_id} ({first.how}) and {second.worker} msg "
        f"{second.msg_id} ({second.how})"
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
