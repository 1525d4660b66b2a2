"""Every code name the docs give resolves: a renamed module, function or setting fails here, not in a reader's hands.

What is checked, in README.md, docs/*.md and bench/README.md (backticked names outside code blocks):
- a path under a repo folder (`faces/media/still.py`, `deploy/database.sql`) exists; `path.py::test_x` also names
  a test function in it (a trailing `…` matches a prefix); a bare `test_x.py` is found under tests/;
- a dotted name from a repo package (`faces.matching.PhotoMatch.blurred`) imports, then resolves attribute by
  attribute; a call's parentheses are ignored;
- bare names right after a dotted name or a `.py` path, in a run joined by commas only (`a.b.f`, `g`, `h`), or
  after a `.py` path in a heading, resolve beside it: `g` in what holds `f`, or in the file's module;
- a setting (`MEDIA_…`, `WORKER_…`, `ORT_…`, `FACE_MODEL_…`, `R2_…`, `SENTRY_…`) is a name in
  momentlens/settings.py;
- `manage.py NAME` (in code blocks too) is a management command;
- a link to a repo file exists, and a `#anchor` into a Markdown file is one of its headings.
"""

import importlib
import re
from pathlib import Path

import django
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("faces", "jobqueue", "momentlens", "demo", "bench", "tests")
FOLDERS = (*PACKAGES, "deploy", "scripts", "docs")
SETTING = re.compile(r"^(MEDIA|WORKER|ORT|FACE_MODEL|R2|SENTRY)_[A-Z0-9_]+$")
# Shell variables of docs/OPERATIONS.md's install steps, named like settings but never read by Django.
SHELL_VARIABLES = {"WORKER_REPO"}
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(rf"^((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(\(.*\))?$")
PATH = re.compile(rf"^((?:{'|'.join(FOLDERS)})/[\w./-]*?)(::(\w+)(…)?)?/?$")
TEST_FILE = re.compile(r"^(test_\w+\.py)(::(\w+)(…)?)?$")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(\.\w+)*$")
# System check ids (`faces.E002`) are named like attributes but are strings.
CHECK_ID = re.compile(r"\.[EWI]\d{3}$")
COMMAND = re.compile(r"manage\.py\s+([a-z_]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def doc_lines():
    """(doc, line number, line, in a code block) for every line of every doc."""
    for doc in DOCS:
        fenced = False
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            yield doc, number, line, fenced


def resolve_dotted(name: str):
    """The object a dotted name names, or None."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(found, attr):
                return None
            found = getattr(found, attr)
        return found
    return None


def module_of_path(path: str) -> str | None:
    if not path.endswith(".py") or not path.startswith(tuple(f"{p}/" for p in PACKAGES)):
        return None
    return path[: -len(".py")].replace("/", ".").removesuffix(".__init__")


def has_test(path: Path, name: str, prefix: bool) -> bool:
    defs = re.findall(r"^\s*(?:async )?def (test_\w+)", path.read_text(), flags=re.M)
    return any(d.startswith(name) if prefix else d == name for d in defs)


def find_test_file(name: str) -> Path | None:
    return next((p for p in sorted((ROOT / "tests").rglob(name))), None)


def anchors(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def unresolved() -> list[str]:
    from django.core.management import get_commands

    commands = set(get_commands())
    settings_text = (ROOT / "momentlens" / "settings.py").read_text()
    problems = []

    def report(doc, number, name, why):
        problems.append(f"{doc.relative_to(ROOT)}:{number}: `{name}` {why}")

    for doc, number, line, fenced in doc_lines():
        for command in COMMAND.findall(line):
            if command not in commands:
                report(doc, number, f"manage.py {command}", "is no management command")
        if fenced:
            continue
        for target in LINK.findall(line):
            if "://" in target or target.startswith("mailto:"):
                continue
            file, _, anchor = target.partition("#")
            linked = (doc.parent / file).resolve() if file else doc
            if not linked.exists():
                report(doc, number, target, "links to a file that does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                report(doc, number, target, "links to a heading that does not exist")

        spans = list(SPAN.finditer(line))
        context = None  # what a bare name in a comma run resolves against
        heading_module = None
        last_test_file = None
        for index, match in enumerate(spans):
            name = match.group(1).strip()
            joined = index > 0 and re.fullmatch(r",\s*", line[spans[index - 1].end() : match.start()])
            if not joined:
                context = None
            if path := PATH.match(name):
                file = ROOT / path.group(1)
                if not file.exists():
                    report(doc, number, name, "is no file or folder of the repo")
                elif path.group(3) and not has_test(file, path.group(3), bool(path.group(4))):
                    report(doc, number, name, "names a test that is not in its file")
                if file.suffix == ".py" and file.name.startswith("test_"):
                    last_test_file = file
                module = module_of_path(path.group(1))
                context = importlib.import_module(module) if module and file.exists() else None
                if line.startswith("#"):
                    heading_module = context
                continue
            if test := TEST_FILE.match(name):
                file = find_test_file(test.group(1))
                if file is None:
                    report(doc, number, name, "is no test file under tests/")
                elif test.group(3) and not has_test(file, test.group(3), bool(test.group(4))):
                    report(doc, number, name, "names a test that is not in its file")
                last_test_file = file
                context = None
                continue
            if name.startswith("::"):
                test = re.fullmatch(r"::(\w+)(…)?", name)
                if test and last_test_file and not has_test(last_test_file, test.group(1), bool(test.group(2))):
                    report(doc, number, name, f"is not a test in {last_test_file.relative_to(ROOT)}")
                continue
            if CHECK_ID.search(name):
                context = None
                continue
            if dotted := DOTTED.match(name):
                found = resolve_dotted(dotted.group(1))
                if found is None:
                    report(doc, number, name, "does not import or resolve")
                    context = None
                else:
                    holder = dotted.group(1).rsplit(".", 1)[0]
                    context = resolve_dotted(holder)
                continue
            if SETTING.match(name) and name not in SHELL_VARIABLES:
                if not re.search(rf"\b{name}\b", settings_text):
                    report(doc, number, name, "is no setting in momentlens/settings.py")
                continue
            beside = context if joined else heading_module
            if beside is not None and IDENTIFIER.match(name):
                found = beside
                for attr in name.split("."):
                    found = getattr(found, attr, None)
                    if found is None:
                        where = getattr(beside, "__name__", beside)
                        report(doc, number, name, f"is not in {where}")
                        break
                if found is None:
                    context = None
                continue
            context = None
    return problems


@pytest.fixture(scope="module", autouse=True)
def _django():
    django.setup()


def test_every_code_name_in_the_docs_resolves():
    problems = unresolved()
    assert not problems, "names in the docs that resolve to nothing:\n" + "\n".join(problems)


def test_the_docs_link_nowhere_outside_the_repo():
    outside = [
        f"{doc.relative_to(ROOT)}:{number}: {target}"
        for doc, number, line, fenced in doc_lines()
        if not fenced
        for target in LINK.findall(line)
        if "://" in target or target.startswith("../shared") or "/shared/" in target
    ]
    assert not outside, "links that leave the repo:\n" + "\n".join(outside)


def test_the_readme_names_no_package_registry_host():
    text = (ROOT / "README.md").read_text().lower()
    hosts = ("pypi.org", "pythonhosted.org", "npmjs", "crates.io", "proxy.golang.org", "repo.maven", "rubygems")
    assert [host for host in hosts if host in text] == []
