from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "faces"
    verbose_name = "Faces, matching and rendering"

    def ready(self):
        from django.core.checks import register

        from faces import checks
        from jobqueue.checks import WORKER, WORKER_START

        for check in (checks.pgvector, checks.storage):
            register(check, WORKER, deploy=True)
        # Also run by run_worker before the loop: face_models builds the resident engine (the warm-up); a
        # missing column of the worker's (tables) stops it before a job fails on it.
        for check in (checks.tables, checks.face_models, checks.thresholds):
            register(check, WORKER, WORKER_START, deploy=True)
        from faces.engines import loaded_engine
        from jobqueue.registry import register_health_field

        register_health_field("engine", loaded_engine)
