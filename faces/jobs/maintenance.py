"""What the worker does for the faces app while the queue is empty: the sweeps (faces/rendering/sweep.py)."""

from django.conf import settings

from faces.rendering.sweep import full_sweep, sweep_pending
from jobqueue.registry import register_idle

# Photos whose after-commit sweep failed: a storage blip outlives its end by at most this.
register_idle("sweep_pending", sweep_pending, every_s=lambda: settings.WORKER_SWEEP_RETRY_S)
# Every photo folder in storage: what a crash between commit and sweep left, deleted photos and events.
register_idle("sweep_storage", full_sweep, every_s=lambda: settings.WORKER_FULL_SWEEP_S)
