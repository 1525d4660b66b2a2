from django.apps import AppConfig


class JobQueueConfig(AppConfig):
    name = "jobqueue"
    verbose_name = "The pgmq consumer"

    def ready(self):
        from django.core.checks import register
        from django.utils.module_loading import autodiscover_modules

        from jobqueue import checks

        for check in (checks.database, checks.session, checks.queue):
            register(check, checks.WORKER, deploy=True)
        # Also run by run_worker before the loop: a worker with no slot to take would wait forever.
        register(checks.reader_settings, checks.WORKER, checks.WORKER_START, deploy=True)
        # Each app's `jobs` module (or package) registers its handlers and periodic tasks when imported.
        autodiscover_modules("jobs")
