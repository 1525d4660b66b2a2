"""The resident face engine: loaded once per worker process, kept for its life."""

import logging
import time

from django.conf import settings

from faces.engines.base import DetectedFace, FaceEngine

log = logging.getLogger("faces.engines")

_resident: FaceEngine | None = None
# How many engines this process has built: the worker test asserts it stays at 1.
loads = 0


def engine_name(setting: str) -> str:
    """The name an engine stores on its rows (and keys its thresholds by), for a FACE_ENGINE value."""
    from faces.engines import insightface, portable

    return {"portable": portable.NAME, "insightface": insightface.NAME}.get(setting, setting)


def build_engine(name: str) -> FaceEngine:
    if name == "portable":
        from faces.engines.portable import PortableEngine

        return PortableEngine(intra_op_threads=settings.ORT_INTRA_OP_THREADS)
    if name == "insightface":
        from faces.engines.insightface import InsightFaceEngine

        return InsightFaceEngine(
            settings.FACE_MODEL_ROOT / "buffalo_l",
            intra_op_threads=settings.ORT_INTRA_OP_THREADS,
            providers=settings.ORT_PROVIDERS,
        )
    raise ValueError(f"FACE_ENGINE must be 'portable' or 'insightface', not {name!r}")


def resident_engine() -> FaceEngine:
    """The process's engine, built on first use (the worker does that at startup)."""
    global _resident, loads
    if _resident is None:
        from jobqueue.logfmt import kv

        started = time.monotonic()
        _resident = build_engine(settings.FACE_ENGINE)
        loads += 1
        log.info(kv("engine_loaded", engine=_resident.name, ms=round((time.monotonic() - started) * 1000)))
    return _resident


__all__ = ["DetectedFace", "FaceEngine", "resident_engine"]
