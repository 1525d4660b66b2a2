"""The checks `manage.py worker_check` runs before systemd starts the worker.

Each check returns a one-line detail or raises CheckFailed with what to fix.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.apps import apps
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection

from jobqueue import queries

PROBE_PREFIX = "_worker_check/"
PGMQ_FUNCTIONS = ("pgmq.read(text,integer,integer,jsonb)", "pgmq.archive(text,bigint)", "pgmq.send(text,jsonb)")


class CheckFailed(Exception):
    def __init__(self, problem: str, fix: str):
        super().__init__(problem)
        self.fix = fix


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], str]
    needs_database: bool = True


def database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('server_version')")
            version = cursor.fetchone()[0]
    except Exception as error:
        raise CheckFailed(
            f"cannot connect: {type(error).__name__}: {str(error).strip()}",
            "check DATABASE_URL (the session pooler, port 5432) and that the database is up",
        ) from None
    return f"PostgreSQL {version}"


def pgvector() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        raise CheckFailed("the vector extension is not installed", "CREATE EXTENSION vector (the API's migrations)")
    return f"pgvector {row[0]}"


def queue() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regprocedure(name) IS NULL FROM unnest(%s::text[]) AS name", [list(PGMQ_FUNCTIONS)])
        if any(missing for (missing,) in cursor.fetchall()):
            raise CheckFailed("pgmq functions are missing", "install the pgmq extension (Supabase: Queues)")
        cursor.execute("SELECT 1 FROM pgmq.list_queues() WHERE queue_name = %s", [queries.QUEUE])
        if cursor.fetchone() is None:
            raise CheckFailed(f"the queue '{queries.QUEUE}' does not exist", f"SELECT pgmq.create('{queries.QUEUE}')")
        length = queries.metrics(cursor).length
    return f"queue {queries.QUEUE} exists, {length} messages"


def tables() -> str:
    """Every table and column the worker's models read (docs/ARCHITECTURE.md §2)."""
    expected = {
        model._meta.db_table: {field.column for field in model._meta.concrete_fields if field.column}
        for model in apps.get_app_config("faces").get_models()
    }
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND table_name = ANY(%s)",
            [list(expected)],
        )
        present: dict[str, set[str]] = {}
        for table, column in cursor.fetchall():
            present.setdefault(table, set()).add(column)
    missing = [
        f"{table}.{column}"
        for table, columns in expected.items()
        for column in sorted(columns - present.get(table, set()))
    ]
    if missing:
        raise CheckFailed(f"missing columns: {', '.join(missing)}", "apply the API's migrations to this database")
    return f"{len(expected)} tables, {sum(map(len, expected.values()))} columns"


def storage() -> str:
    key = f"{PROBE_PREFIX}probe-{uuid.uuid4()}.txt"
    payload = b"momentlens worker_check probe"
    try:
        saved = default_storage.save(key, ContentFile(payload))
        with default_storage.open(saved, "rb") as handle:
            read_back = handle.read()
        default_storage.delete(saved)
    except Exception as error:
        raise CheckFailed(
            f"cannot write, read and delete {key}: {type(error).__name__}: {str(error).strip()[:200]}",
            "check R2_ENDPOINT_URL, R2_BUCKET and the R2 key pair (or that var/media is writable)",
        ) from None
    if read_back != payload:
        raise CheckFailed("the probe object read back differently", "check the bucket and endpoint")
    return f"{type(default_storage._wrapped).__name__} write/read/delete ok"


def face_models() -> str:
    from faces.engines import build_engine
    from faces.engines.base import ModelsMissing

    try:
        engine = build_engine()
    except ModelsMissing as error:
        raise CheckFailed(str(error), "see docs/OPERATIONS.md, 'Face models'") from None
    pack = engine.pack
    checked = "sha256 checked" if pack.sha256 else "structure checked, no digest known"
    return f"{engine.name} loaded: {pack.detector}, {pack.recognizer} ({checked})"


def thresholds() -> str:
    from faces.engines import configured_engine_name
    from faces.thresholds import for_engine

    name = configured_engine_name()
    limits = for_engine(name)
    if not limits.measured:
        return (
            f"WARNING {name}: thresholds NOT MEASURED: failing closed, EVERY face is blurred in EVERY file "
            "(docs/OPERATIONS.md, 'Measuring thresholds')"
        )
    return (
        f"{name}: match={limits.match} cluster={limits.cluster} blur={limits.blur} "
        f"(faces under {limits.small_face_px} px: {limits.blur_for(0)})"
    )


CHECKS = [
    Check("database", database, needs_database=False),
    Check("pgvector", pgvector),
    Check("queue", queue),
    Check("tables", tables),
    Check("storage", storage, needs_database=False),
    Check("face_models", face_models, needs_database=False),
    Check("thresholds", thresholds, needs_database=False),
]
