"""Every code name the docs give resolves: a renamed module, function or setting fails here, not in a reader's hands.

What is checked, in README.md, docs/*.md and bench/README.md (backticked names outside code blocks):
- a path under a repo folder (`faces/media/still.py`, `deploy/database.sql`) exists; `path.py::test_x` also names
  a test function in it (a trailing `…` matches a prefix); a bare `test_x.py` is found under tests/;
- a dotted name from a repo package (`faces.people.PhotoMatch.blurred`) imports, then resolves attribute by
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
    for doc, number, line, fenced in doc_lines():
        where = f"{doc.relative_to(ROOT)}:{number}"
        found = [
            f"`manage.py {name}` is no management command" for name in COMMAND.findall(line) if name not in commands
        ]
        if not fenced:
            found += link_problems(doc, line) + Spans(line, settings_text).problems()
        problems += [f"{where}: {problem}" for problem in found]
    return problems


def link_problems(doc: Path, line: str) -> list[str]:
    problems = []
    for target in LINK.findall(line):
        if "://" in target or target.startswith("mailto:"):
            continue
        file, _, anchor = target.partition("#")
        linked = (doc.parent / file).resolve() if file else doc
        if not linked.exists():
            problems.append(f"`{target}` links to a file that does not exist")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"`{target}` links to a heading that does not exist")
    return problems


class Spans:
    """One line's backticked names, read left to right: a path or dotted name gives the bare names joined to
    it by commas (or, in a heading, every bare name) something to resolve in."""

    def __init__(self, line: str, settings_text: str):
        self.line, self.settings_text = line, settings_text
        self.context = None  # what a bare name in a comma run resolves against
        self.heading_module = None
        self.last_test_file: Path | None = None
        self.found: list[str] = []

    def problems(self) -> list[str]:
        spans = list(SPAN.finditer(self.line))
        for index, match in enumerate(spans):
            joined = index > 0 and re.fullmatch(r",\s*", self.line[spans[index - 1].end() : match.start()])
            if not joined:
                self.context = None
            self.see(match.group(1).strip(), bool(joined))
        return self.found

    def report(self, name: str, why: str) -> None:
        self.found.append(f"`{name}` {why}")

    def see(self, name: str, joined: bool) -> None:
        if path := PATH.match(name):
            self.path(name, path)
        elif test := TEST_FILE.match(name):
            file = find_test_file(test.group(1))
            if file is None:
                self.report(name, "is no test file under tests/")
            else:
                self.named_test(name, file, test.group(3), test.group(4))
            self.last_test_file, self.context = file, None
        elif name.startswith("::"):
            test = re.fullmatch(r"::(\w+)(…)?", name)
            if test and self.last_test_file and not has_test(self.last_test_file, test.group(1), bool(test.group(2))):
                self.report(name, f"is not a test in {self.last_test_file.relative_to(ROOT)}")
        elif CHECK_ID.search(name):
            self.context = None
        elif dotted := DOTTED.match(name):
            self.dotted(name, dotted.group(1))
        elif SETTING.match(name) and name not in SHELL_VARIABLES:
            if not re.search(rf"\b{name}\b", self.settings_text):
                self.report(name, "is no setting in momentlens/settings.py")
        else:
            self.bare(name, joined)

    def path(self, name: str, path: re.Match) -> None:
        file = ROOT / path.group(1)
        if not file.exists():
            self.report(name, "is no file or folder of the repo")
        else:
            self.named_test(name, file, path.group(3), path.group(4))
        if file.suffix == ".py" and file.name.startswith("test_"):
            self.last_test_file = file
        module = module_of_path(path.group(1))
        self.context = importlib.import_module(module) if module and file.exists() else None
        if self.line.startswith("#"):
            self.heading_module = self.context

    def named_test(self, name: str, file: Path, test: str | None, prefix: str | None) -> None:
        """The test a file's name gives after `::`, if any, is in it (a trailing `…`: a prefix)."""
        if test and not has_test(file, test, bool(prefix)):
            self.report(name, "names a test that is not in its file")

    def dotted(self, name: str, dotted: str) -> None:
        if resolve_dotted(dotted) is None:
            self.report(name, "does not import or resolve")
            self.context = None
        else:
            self.context = resolve_dotted(dotted.rsplit(".", 1)[0])

    def bare(self, name: str, joined: bool) -> None:
        beside = self.context if joined else self.heading_module
        if beside is None or not IDENTIFIER.match(name):
            self.context = None
            return
        found = beside
        for attr in name.split("."):
            found = getattr(found, attr, None)
            if found is None:
                self.report(name, f"is not in {getattr(beside, '__name__', beside)}")
                self.context = None
                return


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
