"""The resident face engine: loaded once per worker process, kept for its life, owned by the faces app.

The faces app (faces/apps.py) holds the one `ResidentEngine` and registers it as the worker's startup
work under FACE_ENGINE: run_worker builds it before the first read and hands it to every job through its
context (`ctx.resources[FACE_ENGINE]`, jobqueue/context.py). Work outside a job (the start checks, a shell,
a management command, a bench) asks `resident_engine()` for the same engine.
"""

import logging
import time

from django.conf import settings

from faces.engines.base import PHOTO_PLAN, DetectedFace, FaceEngine, Plan
from faces.engines.packs import pack_folder, pack_named

log = logging.getLogger("faces.engines")

# The name of the engine among a job's resources.
FACE_ENGINE = "face_engine"


def configured_engine_name() -> str:
    """The name the configured pack's engine writes on its rows (and keys its thresholds by)."""
    return pack_named(settings.FACE_MODEL_PACK).engine_name


def build_engine(pack_name: str | None = None, plan: Plan = PHOTO_PLAN) -> FaceEngine:
    """The configured engine (or `pack_name`'s), on the settings' threads and providers; `plan` is the detection
    plan its `analyze` follows unless asked another (a bench's variant: bench/pipeline.py)."""
    from faces.engines.insightface import InsightFaceEngine

    pack = pack_named(pack_name or settings.FACE_MODEL_PACK)
    small = pack.small_faces_from
    return InsightFaceEngine(
        pack,
        pack_folder(pack, settings.FACE_MODEL_ROOT),
        small_face_folder=pack_folder(small, settings.FACE_MODEL_ROOT) if small else None,
        intra_op_threads=settings.ORT_INTRA_OP_THREADS,
        providers=settings.ORT_PROVIDERS,
        plan=plan,
    )


class ResidentEngine:
    """The configured engine, built on the first call and the same one on every call after."""

    def __init__(self):
        self._engine: FaceEngine | None = None

    def __call__(self) -> FaceEngine:
        if self._engine is None:
            started = time.monotonic()
            self._engine = build_engine()
            elapsed = round((time.monotonic() - started) * 1000)
            log.info(
                "engine_loaded", extra={"engine": self._engine.name, "provider": self._engine.provider, "ms": elapsed}
            )
        return self._engine

    def loaded(self) -> dict | None:
        """What /health shows of the engine, once it is built."""
        return None if self._engine is None else {"engine": self._engine.name, "provider": self._engine.provider}


def resident_engine() -> FaceEngine:
    """The faces app's engine, for work outside a job (a job's is `ctx.resources[FACE_ENGINE]`)."""
    from django.apps import apps

    return apps.get_app_config("faces").engine()


__all__ = ["FACE_ENGINE", "DetectedFace", "FaceEngine", "ResidentEngine", "resident_engine"]
