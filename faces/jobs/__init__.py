"""The job handlers. Importing this package registers them (settings.WORKER_JOB_MODULES)."""

from faces.jobs import reference_process  # noqa: F401
