"""The shape of the code (for reviews of structure work): per package its modules, lines and longest function; the
import circles among the modules of faces/ and jobqueue/; with --face-path, what one `face_process` crosses.

What one `face_process` crosses: one still (t1.jpg) and one short clip (a few frames of t1's guests), each in an
event with a DNP member whose reference is ready, run through the face_process handler in process, on a throwaway
embedded PostgreSQL and filesystem storage, under `sys.setprofile`. A module is one file of faces/ or jobqueue/; a
crossing is a distinct (calling module, called module, called function) where the two modules differ: how often a
reader following one photo from the message to the published row has to open another file. A call the standard
library makes on the code's behalf (a `cached_property`'s first read, a context manager's body entered through
`contextlib`) has the library as its caller, so it is not counted.

python scripts/code_shape.py [--face-path] [--list]   (--list: every crossing, not only the counts)
"""

import argparse
import ast
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("faces", "jobqueue", "momentlens", "demo", "bench", "tests", "tests/support", "tests/chaos")
# The packages whose import graph must have no circle, and whose modules a face_process trace counts.
LAYERED = ("faces", "jobqueue")


def functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node.end_lineno - node.lineno + 1


def shape(root: Path, package: str) -> tuple[int, int, str]:
    modules = sorted((root / package).rglob("*.py"))
    lines, longest = 0, ("-", 0, "")
    for path in modules:
        text = path.read_text()
        lines += text.count("\n")
        for name, length in functions(ast.parse(text)):
            if length > longest[1]:
                longest = (name, length, str(path.relative_to(root)))
    name, length, where = longest
    return len(modules), lines, f"`{name}` ({where}, {length} lines)"


def module_imports(root: Path, packages: tuple[str, ...] = LAYERED) -> dict[str, set[str]]:
    """Each module of `packages` (dotted; a package by its name) and the modules of `packages` it imports at
    import time (module level, or a class body: not inside functions, which run later)."""
    names = {_dotted(path.relative_to(root)): path for package in packages for path in (root / package).rglob("*.py")}
    graph = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = {target for target in _imported(ast.parse(path.read_text()), package, names) if target in names}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan): each is an import circle."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                circles.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _imported(tree: ast.Module, package: str, modules: dict):
    """The modules a module's import-time statements import: `from p import m` imports p.m when that is one of
    `modules`, else p."""
    for node in _import_time(tree.body):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def _import_time(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time(getattr(node, field, []) or [])


def _dotted(relative: Path) -> str:
    parts = relative.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--face-path", action="store_true", help="trace one still and one clip face_process")
    parser.add_argument("--list", action="store_true", help="with --face-path: print every crossing")
    args = parser.parse_args()
    print("| package | modules | lines | longest function |")
    print("|---|---:|---:|---|")
    for package in PACKAGES:
        if (ROOT / package).is_dir():
            modules, lines, longest = shape(ROOT, package)
            print(f"| {package} | {modules} | {lines} | {longest} |")
    circles = import_circles(module_imports(ROOT))
    print(f"\nimport circles in {' and '.join(LAYERED)}: {len(circles)}")
    for circle in circles:
        print("  " + " <-> ".join(circle))
    if args.face_path:
        face_path(args.list)


def face_path(listing: bool) -> None:
    sys.path.insert(0, str(ROOT))
    from bench.baseline import embedded_database

    with tempfile.TemporaryDirectory(prefix="face-path-") as folder, embedded_database(Path(folder)):
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
        results = {kind: trace(kind) for kind in ("still", "clip")}
    print("\n| upload | modules touched | boundary crossings |")
    print("|---|---:|---:|")
    for kind, (modules, crossings) in results.items():
        print(f"| {kind} | {len(modules)} | {len(crossings)} |")
    if listing:
        for kind, (_, crossings) in results.items():
            print(f"\n{kind}:")
            for caller, callee, function in sorted(crossings):
                print(f"  {caller} -> {callee}.{function}")


def trace(kind: str) -> tuple[set[str], set[tuple[str, str, str]]]:
    """(modules touched, crossings) of one face_process of a `kind` upload."""
    from django.db import transaction

    from faces.engines import FACE_ENGINE, resident_engine
    from faces.jobs.photo_jobs import face_process
    from jobqueue.context import JobContext

    photo = seed(kind)
    modules: set[str] = set()
    crossings: set[tuple[str, str, str]] = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = _module(frame.f_code.co_filename)
        if callee is None:
            return
        modules.add(callee)
        caller = _module(frame.f_back.f_code.co_filename) if frame.f_back else None
        if caller is not None and caller != callee:
            crossings.add((caller, callee, frame.f_code.co_qualname))

    # The job's context as a worker hands it over: the engine its startup work built.
    ctx = JobContext.outside_worker("face_process", **{FACE_ENGINE: resident_engine()})
    with transaction.atomic():
        sys.setprofile(profile)
        try:
            face_process({"job": "face_process", "photo_id": str(photo.id)}, ctx)
        finally:
            sys.setprofile(None)
    return modules, crossings


def seed(kind: str):
    """An event with a DNP member (reference ready: t1's leftmost face) and one upload of `kind`."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from faces.engines import resident_engine
    from faces.models import Event, EventMember, Photo, SubjectReference
    from momentlens.devservices import samples

    group = samples.group_photo()
    faces = sorted(resident_engine().analyze(group), key=lambda face: face.box[0])
    event = Event.objects.create(name=f"face path: {kind}")
    user = uuid.uuid4()
    EventMember.objects.create(event=event, user_id=user, do_not_publish=True)
    SubjectReference.objects.create(
        user_id=user, upload_key=f"users/{user}/references/r.jpg", status="ready", engine=faces[0].engine,
        embedding=faces[0].embedding,
    )  # fmt: skip
    data = samples.encode_jpeg(group) if kind == "still" else _clip(group, faces)
    photo_id = uuid.uuid4()
    key = default_storage.save(f"events/{event.id}/uploads/{photo_id}.jpg", ContentFile(data))
    return Photo.objects.create(id=photo_id, event=event, uploader_id=user, upload_key=key, upload_thumb_key=key)


def _clip(group, faces) -> bytes:
    from tests.support.video_samples import scene

    return scene(group, faces, width=640, height=360, scale=0.5, dnp_at=lambda i: (40 + 6 * i, 60), count=8).data


def _module(filename: str) -> str | None:
    path = Path(filename)
    try:
        relative = path.resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] not in LAYERED:
        return None
    return ".".join(relative.with_suffix("").parts)


if __name__ == "__main__":
    main()
