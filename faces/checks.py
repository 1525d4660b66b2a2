"""The faces app's part of the worker preflight, as Django system checks (jobqueue/checks.py).

pgvector, tables, storage, face_models and thresholds, each tagged WORKER and
registered with deploy=True in FacesConfig.ready(). tables, face_models and thresholds
are also tagged WORKER_START: run_worker runs them in its own process before the loop.
They only check: the engine is built by the startup work FacesConfig.ready() registers,
which run_worker runs once the checks passed. The ids are listed in docs/OPERATIONS.md.
"""

import uuid

from django.apps import apps
from django.core.checks import CheckMessage, Info
from django.core.checks import Warning as CheckWarning
from django.core.files.storage import default_storage
from django.db import connection

from faces import queries
from faces.publication import PROBE_PREFIX, round_trip, storage_down, storage_refuses
from jobqueue.api import DATABASE_SQL_FIX, DEPENDENCY_DOWN, failed, skip_without_database

STORAGE_FIX = "check R2_ENDPOINT_URL, R2_BUCKET and the R2 key pair (or that var/media is writable)"


def pgvector(app_configs=None, **kwargs) -> list[CheckMessage]:
    if skipped := skip_without_database("pgvector"):
        return skipped
    with connection.cursor() as cursor:
        cursor.execute(queries.PGVECTOR_VERSION)
        row = cursor.fetchone()
    if row is None:
        return failed(
            "pgvector",
            "faces.E001",
            "the vector extension is not installed",
            hint=f"{queries.INSTALL_PGVECTOR} (the API's migrations)",
        )
    return [Info(f"pgvector {row[0]}", obj="pgvector", id="faces.I001")]


def tables(app_configs=None, **kwargs) -> list[CheckMessage]:
    """Every table and column the worker's models read (docs/ARCHITECTURE.md §2)."""
    if skipped := skip_without_database("tables"):
        return skipped
    expected = {
        model._meta.db_table: {field.column for field in model._meta.concrete_fields if field.column}
        for model in apps.get_app_config("faces").get_models()
    }
    with connection.cursor() as cursor:
        cursor.execute(queries.PUBLIC_COLUMNS, [list(expected)])
        present: dict[str, set[str]] = {}
        for table, column in cursor.fetchall():
            present.setdefault(table, set()).add(column)
    missing = [
        f"{table}.{column}"
        for table, columns in expected.items()
        for column in sorted(columns - present.get(table, set()))
    ]
    if missing:
        return failed(
            "tables",
            "faces.E002",
            f"missing columns: {', '.join(missing)}",
            hint=f"the API's migrations, then {DATABASE_SQL_FIX}",
        )
    return [Info(f"{len(expected)} tables, {sum(map(len, expected.values()))} columns", obj="tables", id="faces.I002")]


def storage(app_configs=None, **kwargs) -> list[CheckMessage]:
    """Write, read back and delete one small object under PROBE_PREFIX."""
    key = f"{PROBE_PREFIX}probe-{uuid.uuid4()}.txt"
    payload = b"momentlens worker_check probe"
    try:
        read_back = round_trip(key, payload)
    except Exception as error:
        # Down, or refusing the worker's keys (this round trip is the outage probe itself, so a refusal here is
        # one of the keys): an outage the running worker waits out (DEPENDENCY_DOWN).
        down = storage_down(error) or storage_refuses(error)
        return failed(
            "storage",
            DEPENDENCY_DOWN if down else "faces.E003",
            f"cannot write, read and delete {key}: {type(error).__name__}: {str(error).strip()[:200]}",
            hint=STORAGE_FIX,
        )
    if read_back != payload:
        return failed(
            "storage", "faces.E004", "the probe object read back differently", hint="check the bucket and endpoint"
        )
    return [Info(f"{type(default_storage._wrapped).__name__} write/read/delete ok", obj="storage", id="faces.I003")]


def face_models(app_configs=None, **kwargs) -> list[CheckMessage]:
    """Load the process's engine from the configured pack, on the configured provider: the files (sha256-checked
    where a digest is known), that onnxruntime loads them, and on that provider with no fall-back. The engine
    it loads is the one the worker's startup work then finds loaded (faces/apps.py): built, and on a GPU warmed,
    once."""
    from faces.engines import resident_engine
    from faces.engines.base import ModelsMissing, ProviderUnavailable

    try:
        engine = resident_engine()
    except ModelsMissing as error:
        return failed("face_models", "faces.E005", str(error), hint="see docs/OPERATIONS.md, 'Face models'")
    except ProviderUnavailable as error:
        hint = "install requirements-gpu.txt and the driver on a GPU box, or set ORT_PROVIDERS=CPUExecutionProvider"
        return failed("face_models", "faces.E006", str(error), hint=hint)
    pack = engine.pack
    checked = "sha256 checked" if pack.sha256 else "structure checked, no digest known"
    return [
        Info(
            f"{engine.name} loaded on {engine.provider}: {pack.detector}, {pack.recognizer} ({checked})",
            obj="face_models",
            id="faces.I004",
        )
    ]


def thresholds(app_configs=None, **kwargs) -> list[CheckMessage]:
    from faces.engines import configured_engine_name
    from faces.thresholds import for_engine

    name = configured_engine_name()
    engine_thresholds = for_engine(name)
    if not engine_thresholds.measured:
        return [
            CheckWarning(
                f"{name}: thresholds NOT MEASURED: failing closed, EVERY face is blurred in EVERY file",
                hint="measure them before the first event: docs/OPERATIONS.md, 'Measuring thresholds'",
                obj="thresholds",
                id="faces.W001",
            )
        ]
    if engine_thresholds.calibrated and (unreadable := _unreadable_population(name)):
        return failed("thresholds", "faces.E007", unreadable, hint="see docs/OPERATIONS.md, 'Measuring thresholds'")
    calibrated = ", bars calibrated per reference" if engine_thresholds.calibrated else ""
    return [
        Info(
            f"{name}: match={engine_thresholds.match} cluster={engine_thresholds.cluster} "
            f"blur={engine_thresholds.blur} "
            f"(seen poorly: {engine_thresholds.poor_face_blur}; unsure under norm {engine_thresholds.unsure_norm}"
            f"{calibrated})",
            obj="thresholds",
            id="faces.I005",
        )
    ]


def _unreadable_population(engine: str) -> str | None:
    """Why `engine`'s population cannot be read, or None: its thresholds move each DNP reference's bar by it."""
    from faces import population

    try:
        population.for_engine(engine)
    except (OSError, ValueError, KeyError) as error:
        return f"{engine}: thresholds are calibrated per reference, but its population is unreadable: {error}"
    return None
