from django.apps import AppConfig


class FacesConfig(AppConfig):
    name = "faces"
    verbose_name = "Faces, matching and rendering"

    def ready(self):
        from django.core.checks import register

        from faces import checks
        from faces.engines import FACE_ENGINE, ResidentEngine
        from faces.publication import probe_storage, storage_unusable
        from jobqueue.api import WORKER, WORKER_START, register_dependency, register_health_field, register_startup

        for check in (checks.pgvector, checks.storage):
            register(check, WORKER, deploy=True)
        # Also run by run_worker before the loop: a worker without its models, or without a column it
        # writes (tables), stops before a job fails on it.
        for check in (checks.tables, checks.face_models, checks.thresholds):
            register(check, WORKER, WORKER_START, deploy=True)
        # The engine's warm-up: built once per worker start, before the first read, so no job pays for it;
        # every job then finds it in its context (faces/engines/__init__.py).
        self.engine = ResidentEngine()
        register_startup(FACE_ENGINE, self.engine)
        register_health_field("engine", self.engine.loaded)
        # A try that meets storage's outage, or storage refusing the worker's keys, is waited out, not counted
        # (jobqueue/outage.py).
        register_dependency("storage", storage_unusable, probe_storage)
