"""What the worker does for the faces app besides jobs: the sweeps (faces/rendering/sweep.py)."""

from django.conf import settings

from faces.rendering.sweep import FULL_SWEEP, sweep_pending
from jobqueue.api import register_periodic

# Photos whose after-commit sweep failed, between jobs too: a storage blip outlives its end
# by at most this, however long the queue.
register_periodic("sweep_pending", sweep_pending, every_s=lambda: settings.WORKER_SWEEP_RETRY_S)
# Every photo in storage, when the queue is empty: what a crash between commit and sweep
# left, and deleted photos and events. It stops for a message and goes on from there.
register_periodic("sweep_storage", FULL_SWEEP.run, every_s=lambda: settings.WORKER_FULL_SWEEP_S, idle_only=True)
