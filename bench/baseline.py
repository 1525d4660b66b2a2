"""Not a script: what the benches that run a baseline revision's worker beside this tree's share.

The baseline is a git worktree of a revision, run by the same Python against an embedded PostgreSQL that
this tree provisions (columns and indexes it adds change nothing for an older worker), with filesystem
storage under the run's folder and the buffalo_s engine on one thread.
"""

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def beside_baseline(revision: str, measure: Callable, *, rounds: int = 1, before: Callable | None = None) -> dict:
    """`measure(tree, uri, folder)` for the baseline revision's tree and this one, `rounds` times taken in turn,
    on one throwaway database: {"baseline (REV)": [result, ...], "this tree": [...]}. `before()`, if given,
    runs once the database is up, before the first measure (what both trees share)."""
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as folder:
        folder = Path(folder)
        with worktree(revision, folder) as baseline, embedded_database(folder) as uri:
            if before is not None:
                before()
            trees = {f"baseline ({revision})": baseline, "this tree": ROOT}
            results = {name: [] for name in trees}
            for _ in range(rounds):
                for name, tree in trees.items():
                    results[name].append(measure(tree, uri, folder))
    return results


@contextmanager
def worktree(revision: str, folder: Path) -> Iterator[Path]:
    """`revision` checked out in `folder` / "baseline" for the run, removed after."""
    tree = folder / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=ROOT, check=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)


@contextmanager
def embedded_database(folder: Path) -> Iterator[str]:
    """A throwaway PostgreSQL in `folder`, Django set up on it (and on filesystem storage there); its URI."""
    from momentlens.devservices.postgres import EmbeddedPostgres

    server = EmbeddedPostgres(folder / "pgdata").ensure_ready()
    try:
        os.environ.update({"DATABASE_URL": server.uri, "MOMENTLENS_VAR_DIR": str(folder / "var")})
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
        import django

        django.setup()
        yield server.uri
    finally:
        server.stop()


def worker_env(uri: str, folder: Path) -> dict:
    """A worker's environment: the run's database and storage, one onnxruntime thread, no health port."""
    env = {**os.environ, "DATABASE_URL": uri, "MOMENTLENS_VAR_DIR": str(folder / "var"), "ORT_INTRA_OP_THREADS": "1"}
    return env | {"WORKER_IDLE_POLL_S": "0.1", "WORKER_HEALTH_PORT": "0", "PYTHONUNBUFFERED": "1"}


def run_worker(tree: Path) -> list[str]:
    return [sys.executable, str(tree / "manage.py"), "run_worker", "--drain", "--health-port", "0"]


def drain(tree: Path, env: dict, log: Path) -> None:
    """`tree`'s worker, until the queue is empty; a worker that fails ends the bench with its log's last lines."""
    with open(log, "w") as out:
        finished = subprocess.run(run_worker(tree), cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT)
    if finished.returncode != 0:
        last_lines = "\n".join(log.read_text().splitlines()[-20:])
        raise SystemExit(f"the worker of {tree} exited {finished.returncode}; its log ends:\n{last_lines}")


def empty_database() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE faces, unknown_clusters, photo_variants, photos, subject_references, event_members, events, "
            "pgmq.q_jobs, pgmq.a_jobs RESTART IDENTITY CASCADE"
        )


def send(message: dict) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pgmq.send('jobs', %s::jsonb)", [json.dumps(message)])


def on_labelled_set(args, choose: Callable, measure: Callable, report: Callable) -> None:
    """A labelled-set bench: `choose(args)` picks once, with this tree's engine, what both workers get; then
    `measure(tree, uri, folder, *chosen)` for each tree and `report(results, *chosen)` (one result per tree)."""
    chosen = {}
    runs = beside_baseline(
        args.baseline,
        lambda tree, uri, folder: measure(tree, uri, folder, *chosen["set"]),
        before=lambda: chosen.setdefault("set", choose(args)),
    )
    report({name: results[0] for name, results in runs.items()}, *chosen["set"])


def upload_photo(event, path: Path):
    """A photo of `event` as the API makes it from the file at `path`, its face_process sent; its id."""
    from faces.models import Photo

    photo_id = uuid.uuid4()
    key = put_file(f"events/{event.id}/uploads/{photo_id}{path.suffix}", path)
    Photo.objects.create(id=photo_id, event=event, uploader_id=uuid.uuid4(), upload_key=key, upload_thumb_key=key)
    send({"job": "face_process", "photo_id": str(photo_id)})
    return photo_id


def send_reference(user_id, path: Path) -> None:
    """A reference upload of `user_id` from the file at `path`, pending, its reference_process sent."""
    from faces.models import SubjectReference

    key = put_file(f"users/{user_id}/references/{uuid.uuid4()}.jpg", path)
    reference = SubjectReference.objects.create(user_id=user_id, upload_key=key, status="pending")
    send({"job": "reference_process", "reference_id": str(reference.id)})


def put_file(key: str, path: Path) -> str:
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    return default_storage.save(key, ContentFile(path.read_bytes()))
