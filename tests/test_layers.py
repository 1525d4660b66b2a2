"""The layers (docs/ARCHITECTURE.md §10): each package imports only from the ones below it, anywhere.

    demo  ->  faces  ->  jobqueue  ->  Django, psycopg, the pgmq SQL
    momentlens (configuration) names the apps by string only.

The faces app plugs into the queue through Django: its job modules are discovered
(autodiscover_modules("jobs")) and its checks registered from its own ready(). Of the queue it
uses only jobqueue.api: registration, the context, the errors, enqueue, locks, check helpers.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module an import statement names, at any depth (inside functions too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


# What each package may not import: everything above it.
ABOVE = {
    "jobqueue": ("faces", "demo", "momentlens"),
    "faces": ("demo",),
    "momentlens": ("jobqueue", "faces", "demo"),
}


def imports_in(package: str) -> list[tuple[str, str]]:
    """(path:line, module) for every import in `package`."""
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    return [
        (f"{path.relative_to(ROOT)}:{line}", module)
        for path in files
        for line, module in imported_modules(ast.parse(path.read_text(), filename=str(path)))
    ]


def upward_imports(package: str) -> list[str]:
    return [f"{where}: {module}" for where, module in imports_in(package) if module.split(".")[0] in ABOVE[package]]


def test_jobqueue_imports_nothing_from_faces():
    assert upward_imports("jobqueue") == []


def test_no_package_imports_one_above_it():
    assert {package: upward_imports(package) for package in ABOVE} == {package: [] for package in ABOVE}


def queue_imports_beside_the_api(package: str) -> list[str]:
    """Every import in `package` of a jobqueue module other than jobqueue.api."""
    return [
        f"{where}: {module}"
        for where, module in imports_in(package)
        if module.split(".")[0] == "jobqueue" and module != "jobqueue.api"
    ]


def test_faces_uses_the_queue_only_through_jobqueue_api():
    assert queue_imports_beside_the_api("faces") == []


def test_the_scan_sees_imports_inside_functions():
    tree = ast.parse("def f():\n    from faces.engines import resident_engine\n    import faces.jobs\n")
    assert [module for _, module in imported_modules(tree)] == ["faces.engines", "faces.jobs"]


def test_django_setup_discovers_the_faces_jobs():
    """No settings list: JobQueueConfig.ready() imports every app's `jobs` (autodiscover_modules)."""
    script = (
        "import django; django.setup(); from jobqueue import registry; "
        "print(' '.join(sorted(name for name in ('face_process', 'thumbnail_dims', 'reprocess', "
        "'reprocess_event', 'reference_process') if registry.lookup(name))))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "momentlens.settings"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "face_process",
        "reference_process",
        "reprocess",
        "reprocess_event",
        "thumbnail_dims",
    ]
