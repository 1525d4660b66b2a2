from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "faces"
    verbose_name = "Faces, matching and rendering"

    def ready(self):
        from django.core.checks import register

        from faces import checks
        from jobqueue.checks import WORKER, WORKER_START

        for check in (checks.pgvector, checks.tables, checks.storage):
            register(check, WORKER, deploy=True)
        # Also run by run_worker before the loop: face_models builds the resident engine (the warm-up).
        for check in (checks.face_models, checks.thresholds):
            register(check, WORKER, WORKER_START, deploy=True)
