"""The job handlers. Importing this package registers them (settings.WORKER_JOB_MODULES)."""

from faces.jobs import photo_jobs, reference_process  # noqa: F401
