"""One try: one read of one message (procrastinate's `_process_job(job)`).

A Try holds what the loop knows of the message it read: the message, its payload and the job
it asks for (or why it asks for none), the fields every log line of the try carries, when the
try began and the error it ended with. It builds the context its handler runs with
(jobqueue/context.py), whose checkpoint is the reader's lease (jobqueue/lease.py) and the reader's preemption
(jobqueue/privacy_lane.py), and whose resources are what the worker's startup work built.
"""

import time
from collections.abc import Mapping

from jobqueue import messages, queries, registry
from jobqueue.context import JobContext
from jobqueue.errors import PermanentJobError
from jobqueue.lease import Lease
from jobqueue.privacy_lane import Preemption


class Try:
    def __init__(
        self,
        message: queries.Message,
        lease: Lease,
        preemption: Preemption,
        resources: Mapping[str, object],
        limits: messages.MessageLimits,
    ):
        self.message = message
        self.started = time.monotonic()
        self.payload, self.job, self.problem = _parse(message.body, limits)
        self.fields = {"msg_id": message.msg_id, "try": message.read_ct, **registry.ids_of(self.payload)}
        # What ended a try whose handler raised (reported to Sentry when it was the last try).
        self.error: Exception | None = None
        self._lease = lease
        self._preemption = preemption
        self._resources = resources

    @property
    def msg_id(self) -> int:
        return self.message.msg_id

    @property
    def number(self) -> int:
        """pgmq's read_ct: 1 on the first try."""
        return self.message.read_ct

    def runs(self) -> None:
        """Its job is about to run: from here on its lines name the job too."""
        self.fields["job"] = self.job.name

    def context(self) -> JobContext:
        return JobContext(
            job=self.job.name,
            msg_id=self.msg_id,
            try_number=self.number,
            fields=dict(self.fields),
            resources=self._resources,
            _checkpoint=self._checkpoint,
        )

    def _checkpoint(self) -> None:
        """The lease first (a try cut off from its session stops), then privacy work waiting on this try."""
        self._lease.checkpoint()
        self._preemption.checkpoint()

    def ms(self) -> int:
        return round((time.monotonic() - self.started) * 1000)


def _parse(body, limits: messages.MessageLimits) -> tuple[dict | None, messages.Job | None, PermanentJobError | None]:
    """The decoded payload (if JSON), the job it asks for (if valid), and else why not."""
    try:
        payload = messages.decode(body, limits)
    except PermanentJobError as problem:
        return None, None, problem
    try:
        return payload, messages.job_of(payload), None
    except PermanentJobError as problem:
        return payload, None, problem
