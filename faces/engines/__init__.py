"""The resident face engine: loaded once per worker process, kept for its life."""

import logging
import time

from django.conf import settings

from faces.engines.base import DetectedFace, FaceEngine
from faces.engines.packs import pack_folder, pack_named

log = logging.getLogger("faces.engines")

_resident: FaceEngine | None = None


def configured_engine_name() -> str:
    """The name the configured pack's engine writes on its rows (and keys its thresholds by)."""
    return pack_named(settings.FACE_MODEL_PACK).engine_name


def build_engine(pack_name: str | None = None) -> FaceEngine:
    from faces.engines.insightface import InsightFaceEngine

    pack = pack_named(pack_name or settings.FACE_MODEL_PACK)
    small = pack.small_faces_from
    return InsightFaceEngine(
        pack,
        pack_folder(pack, settings.FACE_MODEL_ROOT),
        small_face_folder=pack_folder(small, settings.FACE_MODEL_ROOT) if small else None,
        intra_op_threads=settings.ORT_INTRA_OP_THREADS,
        providers=settings.ORT_PROVIDERS,
    )


def loaded_engine() -> dict | None:
    """What /health shows of the resident engine, once it is loaded."""
    return None if _resident is None else {"engine": _resident.name, "provider": _resident.provider}


def resident_engine() -> FaceEngine:
    """The process's engine, built on first use (the worker's startup work, registered in faces/apps.py)."""
    global _resident
    if _resident is None:
        started = time.monotonic()
        _resident = build_engine()
        elapsed = round((time.monotonic() - started) * 1000)
        log.info("engine_loaded", extra={"engine": _resident.name, "provider": _resident.provider, "ms": elapsed})
    return _resident


__all__ = ["DetectedFace", "FaceEngine", "resident_engine"]
