"""The job's checkpoint for code not yet handed its context: `ensure_session()` is `Lease.checkpoint`.

Handlers call `ctx.checkpoint()` (jobqueue/context.py, jobqueue/lease.py); this module goes once the
faces modules that still import it pass their handler's `ctx.checkpoint` down instead.
"""

from jobqueue.lease import Lease

ensure_session = Lease().checkpoint
