"""Privacy work first, even over the try in flight (docs/ARCHITECTURE.md §4, "The privacy lane").

A change that tightens privacy is a first-class job (`registry.privacy_jobs()`: reprocess_event,
reference_process) that hides what the change exposes in its own transaction. It is read before any waiting
message, but a reader in the middle of a long try (a minute of 4K video, a 48 MP photo) reads nothing until
that try ends. So while an ordinary try runs, the reader's heartbeat thread (jobqueue/heartbeat.py) watches,
on its own connection, for privacy work that waits on this reader:

- a privacy job visible in the queue, with nobody reading it: with one reader slot at once, with several
  once it has waited PREEMPT_GRACE_S (an idle reader takes it within its idle poll first);
- a privacy job another reader is running, blocked on a row lock this reader's try holds (the photo it
  renders: a hide locks every photo of its event, and waits for the try in flight on one of them).

Either way it requests a preemption, and the try stops at its next checkpoint (`ctx.checkpoint()`: between
a photo's tiles, a clip's frames, before any upload) with `Preempted`. The loop rolls it back, gives its
message back uncounted (visible now, its read_ct as before the read: a preemption is no failed try) and
reads on: the privacy job first. The preempted try runs again after it, reusing the detection it had done
(faces.detection.RememberedLooks). Privacy jobs are never preempted; the renders a hide sends first stop no try
(they are read first, and a privacy job may stop them like any other try).
"""

import threading

# With several reader slots, how long a privacy job waits unread before a busy reader stops its try for it.
# Idle readers poll every WORKER_IDLE_POLL_S (1 s): they take it first.
PREEMPT_GRACE_S = 1.5
# How often the heartbeat thread looks for privacy work while an ordinary try runs.
WATCH_EVERY_S = 0.25
# A privacy job is read hidden this long at most, and its heartbeat keeps it hidden while it runs: with several
# readers, one killed in the middle of a hide leaves its message to another within seconds, not after the
# visibility timeout (a minute by default). Read twice, a privacy job waits for its first run's locks (the event's
# fan-out lock, the reference's row) and then finds nothing left to do.
PRIVACY_VT_S = 3


class Preempted(Exception):
    """The try stopped at its checkpoint for privacy work: rolled back, its message given back uncounted."""


class Preemption:
    """Whether the try in flight must stop for privacy work. Set by the heartbeat thread, read at checkpoints."""

    def __init__(self):
        self._requested = threading.Event()
        self.reason: str | None = None

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
