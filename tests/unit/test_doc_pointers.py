"""Every pointer into the docs lands: a renumbered section or a renamed heading fails here, not in a reader's hands.

Read in every text file of the repo (code, comments, docstrings, SQL, deploy/, the docs; not .venv, var, .git), with
a comment's lines joined so that a pointer may wrap:
- `§N` (`docs/ARCHITECTURE.md §4`, `ARCHITECTURE §11`, or a bare `§4` in code and in the doc itself) names one of
  ARCHITECTURE.md's numbered sections (`## 4. Consumer ...`); `§N.M`, `§N rule M` and `§N, rule M` also name item M
  of the numbered list of rules in section N's own text (before its first `###`);
- `§N, "Title"` (or `§N "Title"`, `§N ("Title")`) names a `###` heading or a bold lead-in (`**Title.**`) inside
  section N, by its start; a heading's code spans in parentheses are left out (`### Matching (`...`) and the blur
  decision` is "Matching and the blur decision");
- `docs/MEASUREMENTS.md, "Title"` (or `("Title")`, single quotes, `MEASUREMENTS, "Title"`, the same for OPERATIONS and
  ARCHITECTURE) names a heading of that doc, by its start;
- `docs/OPERATIONS.md, step N` names a numbered step (`**N. ...`) of "From the embedded defaults to production";
- `FILE.md#anchor` (links included) names a heading of that Markdown file, as GitHub makes anchors;
- nothing points at a document outside the repo: no `SPEC`, `SPEC §N` (the design brief is not part of it).
"""

import bisect
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIPPED_DIRS = {".venv", "var", ".git", ".pytest_cache", ".ruff_cache", ".hypothesis", ".tools", "__pycache__"}
BINARY = {".jpg", ".jpeg", ".png", ".webp", ".gif", ".mp4", ".onnx", ".pyc"}
# The quotes around a title, and what may stand between a pointer and its title: a comma, a space, a parenthesis.
TITLE = r"""(?:,\s*|:\s*|\s+\(?|\()(?P<title>"[^"\n]{1,80}"|“[^”\n]{1,80}”|'[^'\n]{1,80}')"""
SECTION = re.compile(rf"§(?P<n>\d+)(?:\.(?P<m>\d+)|,?\s+rule\s+(?P<rule>\d+))?(?:{TITLE})?")
DOC = re.compile(
    rf"\b(?:docs/)?(?P<doc>MEASUREMENTS|OPERATIONS|ARCHITECTURE)(?:\.md)?`?"
    rf"(?:{TITLE})?(?:,\s*step\s+(?P<step>\d+))?"
)
ANCHOR = re.compile(r"(?P<file>[\w./-]*\.md)#(?P<anchor>[\w-]+)")
SPEC = re.compile(r"\bSPEC\b|\b[Ss]pec(?:ification)?\s*§")
PRODUCTION = "From the embedded defaults to production"


@dataclass(frozen=True)
class Found:
    path: Path
    line: int
    match: re.Match

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {' '.join(self.match.group(0).split())!r}"


@cache
def text_files() -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = sorted(name for name in dirs if name not in SKIPPED_DIRS)
        files += [Path(folder) / name for name in sorted(names) if Path(name).suffix.lower() not in BINARY]
    return [path for path in files if path != Path(__file__).resolve()]


@cache
def flat(path: Path) -> tuple[str, list[int]] | None:
    """The file's text with each line's indent and comment marker dropped and its lines joined by a space, so a
    pointer that wraps reads as one; and where each line starts in it."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        return None
    marker = r"#+\s?|--\s?" if path.suffix != ".md" else ""
    starts, pieces, offset = [], [], 0
    for line in lines:
        piece = re.sub(rf"^\s*(?:{marker})" if marker else r"^\s*", "", line)
        starts.append(offset)
        pieces.append(piece)
        offset += len(piece) + 1
    return " ".join(pieces), starts


def pointers(pattern: re.Pattern) -> list[Found]:
    found = []
    for path in text_files():
        read = flat(path)
        if read is None:
            continue
        text, starts = read
        for match in pattern.finditer(text):
            found.append(Found(path, bisect.bisect_right(starts, match.start()), match))
    return found


def headings(doc: Path) -> list[tuple[int, int, str]]:
    """(line index, level, title) of each Markdown heading, code blocks left out."""
    found, fenced = [], False
    for index, line in enumerate(doc.read_text().splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"^(#+)\s+(.*?)\s*$", line)):
            found.append((index, len(heading.group(1)), heading.group(2)))
    return found


def plain(title: str) -> str:
    """A heading as a pointer quotes it: code spans in parentheses left out, then backticks and emphasis."""
    title = re.sub(r"\s*\(`[^)]*`\)", "", title)
    return " ".join(title.replace("`", "").replace("*", "").split())


def starts_with(title: str, quoted: str) -> bool:
    quoted = " ".join(quoted.split())
    return title == quoted or (title.startswith(quoted) and not title[len(quoted)].isalnum())


def github_anchor(title: str) -> str:
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@cache
def architecture_sections() -> dict[int, list[str]]:
    """ARCHITECTURE.md's numbered sections (`## N. Title`), each with its lines up to the next `##`."""
    doc = DOCS / "ARCHITECTURE.md"
    lines = doc.read_text().splitlines()
    tops = [(index, title) for index, level, title in headings(doc) if level <= 2]
    sections = {}
    for (index, title), (end, _) in zip(tops, [*tops[1:], (len(lines), "")], strict=True):
        if number := re.match(r"^§?(\d+)\.?\s", title):
            sections[int(number.group(1))] = lines[index:end]
    return sections


def rules(lines: list[str]) -> set[int]:
    """The numbers of the list in a section's own text, before its first subsection."""
    found = set()
    for line in lines[1:]:
        if line.startswith("### "):
            break
        if item := re.match(r"^(\d+)\.\s", line):
            found.add(int(item.group(1)))
    return found


def lead_ins(lines: list[str]) -> list[str]:
    """A section's `###` headings and bold lead-ins (`**Recognition.** ...`), as a pointer quotes them."""
    titles = [plain(line[4:]) for line in lines if line.startswith("### ")]
    titles += [plain(bold) for line in lines for bold in re.findall(r"^\s*(?:\d+\.\s+|-\s+)?\*\*(.+?)\*\*", line)]
    return [title.rstrip(".:") if title.endswith((".", ":")) else title for title in titles]


def section_problem(match: re.Match) -> str | None:
    sections = architecture_sections()
    number = int(match.group("n"))
    if number not in sections:
        return f"§{number} is no section of docs/ARCHITECTURE.md (it has §{min(sections)} to §{max(sections)})"
    rule = match.group("m") or match.group("rule")
    if rule and int(rule) not in rules(sections[number]):
        return f"§{number} has no rule {rule} (its rules: {sorted(rules(sections[number]))})"
    title = match.group("title") and match.group("title")[1:-1]
    if title and not any(starts_with(lead, title) for lead in lead_ins(sections[number])):
        return f'§{number} has no heading or bold lead-in "{title}"'
    return None


def doc_problem(match: re.Match) -> str | None:
    doc = DOCS / f"{match.group('doc')}.md"
    titles = {index: plain(title) for index, _, title in headings(doc)}
    title, step = match.group("title") and match.group("title")[1:-1], match.group("step")
    if title and not any(starts_with(heading, title) for heading in titles.values()):
        return f'docs/{doc.name} has no heading "{title}"'
    if step:
        if doc.name != "OPERATIONS.md" or (title and not starts_with(PRODUCTION, title)):
            return f'step {step} points at no numbered steps (only OPERATIONS.md\'s "{PRODUCTION}" has them)'
        start = next(index for index, heading in titles.items() if heading == PRODUCTION)
        end = min((index for index in titles if index > start), default=None)
        body = doc.read_text().splitlines()[start:end]
        if not any(line.startswith(f"**{step}. ") for line in body):
            return f'OPERATIONS.md\'s "{PRODUCTION}" has no step {step}'
    return None


def anchor_problem(found: Found) -> str | None:
    name, anchor = found.match.group("file"), found.match.group("anchor")
    candidates = [found.path.parent / name, ROOT / name, DOCS / name]
    target = next((path for path in candidates if path.is_file()), None)
    if target is None:
        return f"{name} is no Markdown file of the repo"
    if anchor not in {github_anchor(title) for _, _, title in headings(target)}:
        return f"{target.relative_to(ROOT)} has no heading with the anchor #{anchor}"
    return None


def test_every_section_pointer_names_a_section_of_architecture():
    found = pointers(SECTION)
    problems = [f"{where}: {problem}" for where in found if (problem := section_problem(where.match))]
    assert not problems, "§ pointers that name nothing in docs/ARCHITECTURE.md:\n" + "\n".join(problems)


def test_every_titled_pointer_names_a_heading_of_its_doc():
    found = [where for where in pointers(DOC) if where.match.group("title") or where.match.group("step")]
    problems = [f"{where}: {problem}" for where in found if (problem := doc_problem(where.match))]
    assert not problems, "pointers to a heading or step that does not exist:\n" + "\n".join(problems)


def test_every_anchor_names_a_heading():
    problems = [f"{where}: {problem}" for where in pointers(ANCHOR) if (problem := anchor_problem(where))]
    assert not problems, "anchors that name no heading:\n" + "\n".join(problems)


def test_nothing_points_at_the_spec():
    found = [str(where) for where in pointers(SPEC)]
    assert not found, (
        "the repo stands alone: point at docs/ARCHITECTURE.md's section instead of the design brief:\n"
        + "\n".join(found)
    )


def test_every_form_of_pointer_is_found():
    """The patterns still see each form the repo uses, so the tests above cannot pass by finding nothing."""
    sections = [where.match for where in pointers(SECTION)]
    titled = [where.match for where in pointers(DOC) if where.match.group("title")]
    assert len(sections) > 100
    assert any(match.group("m") for match in sections)
    assert any(match.group("rule") for match in sections)
    assert any(match.group("title") for match in sections)
    assert {match.group("doc") for match in titled} >= {"MEASUREMENTS", "OPERATIONS"}
    assert any(where.match.group("step") for where in pointers(DOC))
    assert len(pointers(ANCHOR)) > 10
