"""The job handlers and idle tasks. Importing this package registers them; JobQueueConfig.ready() imports
every app's `jobs` (autodiscover_modules), so they are registered in every process once Django is set up."""

from faces.jobs import archive_hooks, maintenance, photo_jobs, reference_process  # noqa: F401
