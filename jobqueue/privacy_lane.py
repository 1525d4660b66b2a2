"""The privacy lane: privacy work before anything, even over the try in flight (docs/ARCHITECTURE.md §4, "The
privacy lane"). The whole lane is here, top-down; its statements are named queries in jobqueue/queries.py.

What privacy work is. A change that tightens privacy (a Do Not Publish toggle, a reference that becomes ready) is
a privacy job: a job registered `first=True` (reprocess_event, reference_process) that hides what the change
exposes in its own transaction (`privacy_jobs`). The renders it sends carry PRIVACY_RENDER_MARK.

1. The read order (`ReadOrder`). Privacy jobs first, oldest first, read hidden for `vt_s` only, as is one sent just
   after that read and read as the oldest message (read twice, after
   its reader died, a privacy job waits for its first run's locks, the event's fan-out lock or the reference's
   row, and then finds nothing left to do); during an outage nothing else (a hide needs the database alone,
   jobqueue/outage.py); then the renders they sent, at most `renders_in_a_row` before one ordinary message; then
   the oldest message. A privacy job's transaction names itself (queries.mark_privacy_try, in the loop), so that
   a reader it waits on can tell.

2. The watch (`Preemption.watch`). A reader in the middle of a long try (a minute of 4K video, a 48 MP photo)
   reads nothing until that try ends. So while an ordinary try runs, the reader's heartbeat thread
   (jobqueue/heartbeat.py) asks every `watch_every_s`, on its own connection (queries.PRIVACY_WAITING), whether
   privacy work waits on this reader:
   - a privacy job visible in the queue, with nobody reading it: with one reader slot at once, with several
     once it has waited `preempt_grace_s` (an idle reader takes it within its idle poll first);
   - a privacy job another reader is running, blocked on a row lock this reader's try holds (the photo it
     renders: a hide locks every photo of its event, and waits for the try in flight on one of them).

3. The stop (`Preemption.checkpoint`). Either way the watch requests a preemption, and the try stops at its next
   checkpoint (`ctx.checkpoint()`: between a photo's tiles, a clip's frames, before any upload) with `Preempted`.
   The loop rolls it back, gives its message back uncounted (queries.give_back: visible now, its read_ct as before
   the read: a preemption is no failed try) and reads on: the privacy job first. The preempted try runs again
   after it, reusing the detection it had done (faces.detection.RememberedLooks). Privacy jobs are never
   preempted; the renders a hide sends first stop no try (they are read first, and a privacy job may stop them
   like any other try).
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass

from jobqueue import messages, queries, registry


@dataclass(frozen=True)
class PrivacyLaneConfig:
    # One ordinary message after this many renders sent first: a big event's re-renders take at most 4 reads in 5
    # while uploads wait.
    renders_in_a_row: int = 4
    # With several reader slots, how long a privacy job waits unread before a busy reader stops its try for it:
    # idle readers poll every WORKER_IDLE_POLL_S (1 s) and take it first.
    preempt_grace_s: float = 1.5
    # How often the heartbeat thread looks for privacy work while an ordinary try runs: a few cheap queries a
    # second, the try stopped within a quarter second.
    watch_every_s: float = 0.25
    # A privacy job is read hidden this long at most, its heartbeat keeping it hidden while it runs: a reader killed
    # in the middle of a hide leaves it to another within seconds, not after the visibility timeout (a minute).
    vt_s: int = 3


PRIVACY_LANE = PrivacyLaneConfig()

# The mark of a render that privacy work sends first (jobqueue.enqueue.enqueue_unless_waiting(first=True)): a
# message containing it is read before ordinary ones, after privacy jobs (jsonb containment,
# pgmq.q_jobs_message_idx). Not to be confused with a job registered `first=True`, a privacy job itself.
PRIVACY_RENDER_MARK = {"first": True}


def privacy_jobs() -> list[dict]:
    """The containments of privacy work, read before anything and worth stopping a try for: a privacy job's name."""
    return [{"job": job.name} for job in registry.job_types() if job.first]


def is_privacy_job(message: queries.Message) -> bool:
    """Whether a message names a privacy job (a malformed one is not: it is archived as such)."""
    try:
        body = messages.decode(message.body)
    except messages.BadMessage:
        return False
    return any(body.get("job") == job["job"] for job in privacy_jobs())


class ReadOrder:
    """Which message a reader reads next (1. above). One per reader: it counts the renders read in a row."""

    def __init__(self, config: PrivacyLaneConfig, vt_s: int):
        self._config = config
        # The visibility timeout of every other read.
        self._vt_s = vt_s
        # A privacy job's: its heartbeat keeps it hidden this long at a time.
        self.privacy_vt_s = min(vt_s, config.vt_s)
        self._renders_in_a_row = 0

    def read(self, cursor, outage_over: Callable[[], bool]) -> queries.Message | None:
        """Privacy work, oldest first; then the renders it sent first, at most `renders_in_a_row` in a row; then the
        oldest message. `outage_over`: whether the reader reads more than privacy work (jobqueue/outage.py)."""
        message = queries.read_first(cursor, self.privacy_vt_s, privacy_jobs())
        if message is not None or not outage_over():
            return message  # during an outage, privacy work only
        if self._renders_in_a_row < self._config.renders_in_a_row:
            message = queries.read_first(cursor, self._vt_s, [PRIVACY_RENDER_MARK])
            self._renders_in_a_row += message is not None
        if message is None:
            message = queries.read(cursor, self._vt_s)
            self._renders_in_a_row = 0
            if message is not None and is_privacy_job(message):
                # Sent just after the lane's read: hidden for the visibility timeout, a reader killed before its first
                # heartbeat would leave the change unread that long.
                queries.extend_visibility(cursor, message.msg_id, self.privacy_vt_s)
        return message


class Preempted(Exception):
    """The try stopped at its checkpoint for privacy work: rolled back, its message given back uncounted."""


class Preemption:
    """Whether the try in flight must stop for privacy work (2. and 3. above): requested by the heartbeat thread's
    watch, read at the try's checkpoints."""

    def __init__(self, config: PrivacyLaneConfig, *, slots: int):
        self.watch_every_s = config.watch_every_s
        # One reader slot: nobody else will read privacy work, so it preempts at once.
        self._grace_s = 0.0 if slots == 1 else config.preempt_grace_s
        self._requested = threading.Event()
        self.reason: str | None = None

    def watch(self, cursor, reader_pid: int | None) -> bool:
        """On the heartbeat's connection: request a preemption when privacy work waits on the reader whose backend
        is `reader_pid`; whether it was requested."""
        reason = queries.privacy_waiting(cursor, privacy_jobs(), self._grace_s, reader_pid)
        if reason:
            self.request(reason)
        return bool(reason)

    def request(self, reason: str) -> None:
        self.reason = reason
        self._requested.set()

    def clear(self) -> None:
        self._requested.clear()
        self.reason = None

    def checkpoint(self) -> None:
        """Preempted when privacy work waits on this try."""
        if self._requested.is_set():
            raise Preempted(f"privacy work waits: {self.reason}")
