"""The job handlers and idle tasks. Importing this package registers them (settings.WORKER_JOB_MODULES)."""

from faces.jobs import archive_hooks, maintenance, photo_jobs, reference_process  # noqa: F401
