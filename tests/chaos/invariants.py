"""The seventeen invariants a chaos run must keep, and the check of each once the run is over."""

import enum
from collections import Counter


class Invariant(enum.Enum):
    """Each invariant; its value is the row the table prints."""

    MESSAGES_ENDED = "1. every message deleted or archived, with a reason"
    NONE_ARCHIVED_FOR_AN_OUTAGE = "1. no message archived because storage or the database was down"
    DNP_FACES_BLURRED = "2. no DNP face left unblurred in a published file"
    EDGE_CUT_FACES_BLURRED = "2. no DNP face cut by the image edge left unblurred to that edge"
    CLIPS_RENDERED = "2. no multi-frame upload published as itself"
    ONE_PICTURE_PER_STILL = "2. no published still carries more than the one picture it shows"
    NO_HIDDEN_DNP_FACE = "2. no picture in a published still's bytes shows a DNP face"
    HIDDEN_FROM_COMMIT = "2. from the hide's commit, no photo public with the changed member's face unblurred"
    HIDDEN_WITHIN_WINDOW = "2. no photo public with the changed member's face unblurred 5 s after the change's send"
    FILES_BEFORE_PUBLISHING = "2. no photo published before its files existed"
    ROW_KEYS_EXIST = "3. every key a row points at exists"
    NO_ORPHAN_LEFT = "3. no orphan left after the workers' own sweeps"
    UPLOADS_UNCHANGED = "3. no upload object modified or deleted"
    NAMED_OBJECTS_KEPT = "3. no object a committed row names replaced by another try"
    OUTCOMES_MATCH = "4. archived photos unpublished, completed ones with N+1 files"
    WORKER_ALIVE = "5. worker alive (no exit the harness did not cause)"
    ONE_READER_AT_A_TIME = "6. no photo written by two readers at once (a cut-off try's files never named, and swept)"


def check_invariants(chaos) -> None:
    """Every invariant, in the table's order, from the rows, the bucket, the workers' lines and the monitors."""
    from django.db import connection

    from tests.chaos import blur_checks, clip_checks, hide_checks, reader_checks, still_checks, storage_checks
    from tests.chaos.storage import storage_snapshot
    from tests.chaos.worker_logs import worker_log_lines

    connection.close()
    lines = worker_log_lines([worker.log for worker in chaos.fleet.workers])
    count_jobs(chaos, lines)
    snapshot = storage_snapshot(chaos.services)
    checks = {
        Invariant.MESSAGES_ENDED: lambda: unended_messages(chaos),
        Invariant.NONE_ARCHIVED_FOR_AN_OUTAGE: lambda: archived_for_an_outage(chaos),
        Invariant.DNP_FACES_BLURRED: lambda: blur_checks.unblurred_stills(chaos) + blur_checks.unblurred_clips(chaos),
        Invariant.EDGE_CUT_FACES_BLURRED: lambda: blur_checks.unblurred_edge_cuts(chaos),
        Invariant.CLIPS_RENDERED: lambda: clip_checks.media_published_as_itself(chaos, snapshot),
        Invariant.ONE_PICTURE_PER_STILL: lambda: still_checks.extra_pictures(chaos),
        Invariant.NO_HIDDEN_DNP_FACE: lambda: still_checks.hidden_dnp_faces(chaos),
        Invariant.HIDDEN_FROM_COMMIT: lambda: hide_checks.exposed_after_hide(chaos, lines),
        Invariant.HIDDEN_WITHIN_WINDOW: lambda: hide_checks.exposed_past_window(chaos),
        Invariant.FILES_BEFORE_PUBLISHING: lambda: chaos.watch.early_publications,
        Invariant.ROW_KEYS_EXIST: lambda: storage_checks.missing_row_keys(chaos),
        Invariant.NO_ORPHAN_LEFT: lambda: storage_checks.orphans_left(chaos, snapshot),
        Invariant.UPLOADS_UNCHANGED: lambda: storage_checks.changed_uploads(chaos),
        Invariant.NAMED_OBJECTS_KEPT: lambda: storage_checks.replaced_named(chaos, snapshot),
        Invariant.OUTCOMES_MATCH: lambda: storage_checks.outcome_mismatches(chaos, lines),
        Invariant.WORKER_ALIVE: lambda: len(chaos.fleet.unexpected_exits),
        Invariant.ONE_READER_AT_A_TIME: lambda: reader_checks.readers_at_once(chaos, lines, snapshot),
    }
    for invariant, check in checks.items():
        chaos.report.invariants[invariant] = check()
    chaos.report.abandoned_waits = reader_checks.abandoned_waits(chaos, lines)
    chaos.report.notes.append(resumed_after_storage(chaos, lines))
    chaos.report.notes += [storage_checks.sweep_summary(lines), clip_checks.media_summary(chaos, lines)]


def count_jobs(chaos, lines: list[dict]) -> None:
    """Tries retried and jobs handled, from the workers' lines."""
    events = Counter(fields["event"] for fields in lines)
    chaos.report.retries = events["job_retry"]
    chaos.report.handled = events["job_done"] + events["job_archived"]


def unended_messages(chaos) -> int:
    """Messages still queued, and archived ones without a reason; the archived ones counted by reason."""
    with chaos.services.db() as conn:
        left = conn.execute("SELECT count(*) FROM pgmq.q_jobs").fetchone()[0]
        unexplained = conn.execute(
            "SELECT count(*) FROM pgmq.a_jobs WHERE headers->>'archived_reason' IS NULL"
        ).fetchone()[0]
        reasons = conn.execute("SELECT headers->>'archived_reason', count(*) FROM pgmq.a_jobs GROUP BY 1").fetchall()
    chaos.report.archived = Counter(dict(reasons))
    return left + unexplained


# How an outage's error reads in the archive (jobqueue.outcome's summary: "Type: message"): a connection botocore
# could not make or keep, S3 answering with a server error, the database gone.
OUTAGE_ERROR = (
    r"^(EndpointConnectionError|ConnectTimeoutError|ReadTimeoutError|ConnectionClosedError|ProxyConnectionError"
    r"|ClientError: An error occurred \((500|502|503|504|InternalError|ServiceUnavailable|SlowDown)\)"
    r"|OperationalError|InterfaceError)"
)


def archived_for_an_outage(chaos) -> int:
    """Archived messages whose error is an outage's (jobqueue/outage.py waits those out instead)."""
    with chaos.services.db() as conn:
        count = conn.execute(
            "SELECT count(*) FROM pgmq.a_jobs WHERE headers->>'error' ~ %s", [OUTAGE_ERROR]
        ).fetchone()[0]
    chaos.report.archived_for_outage = count
    return count


def resumed_after_storage(chaos, lines: list[dict]) -> str:
    """How long after the S3 server was back each waiting reader read on: each `outage_ends` line against the
    latest return of storage before it."""
    from tests.chaos.worker_logs import log_time

    returns = chaos.report.storage_returns
    waits = []
    for end in sorted(log_time(fields) for fields in lines if fields["event"] == "outage_ends"):
        before = [back for back in returns if back <= end + 1.0]  # log stamps are truncated to the millisecond
        if before:
            waits.append(max(0.0, end - max(before)))
    most = f"{max(waits):.1f} s" if waits else "-"
    return (
        f"storage outages: {len(returns)}, waits that ended: {len(waits)}; the longest a reader read on after "
        f"storage was back: {most}"
    )
