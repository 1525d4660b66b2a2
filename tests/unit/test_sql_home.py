"""Every SQL statement of a package lives in its named queries (docs/ARCHITECTURE.md §4): one module per package.

Every .py file of faces/, jobqueue/, momentlens/ and demo/ is parsed; a string that reads as an SQL statement (an
uppercase keyword, whitespace, then more) outside a home below fails, named by file:line. An f-string is read as
its text with `{}` where its values go, so a statement built by formatting is found too. No database: it reads
source.
"""

import ast
import re
from pathlib import Path

from jobqueue import queries

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("faces", "jobqueue", "momentlens", "demo")
# Case-sensitive: prose ("Set a session-level setting") is not a statement; "SELECT" alone is not one either.
STATEMENT = re.compile(r"(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|GRANT|LOCK|SET|DO)\s+\S")

# Where a statement may live. A .sql file (faces/sql/, deploy/) is one too: it is never parsed here.
HOMES = (
    "jobqueue/queries.py",  # the queue's statements: the consumer's, its ops commands', its checks'
    "faces/queries.py",  # the faces app's statements
)
HOME_FOLDERS = (
    # The embedded PostgreSQL's provisioning (momentlens/devservices/postgres.py): on a dev, demo or test database
    # it plays Supabase's and the API's migrations' part (pgvector, pgmq, the schema mirror) on a psycopg
    # connection of its own, before Django connects; production never runs it. Its other modules (SeaweedFS,
    # samples, pixels) hold no SQL.
    "momentlens/devservices/",
)


def is_home(relative: str) -> bool:
    return relative in HOMES or relative.startswith(HOME_FOLDERS) or "migrations" in relative.split("/")[:-1]


def string_texts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal: a plain one as it is, an f-string with `{}` for each value."""
    inside_fstrings = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [part.value if isinstance(part, ast.Constant) else "{}" for part in node.values]
            inside_fstrings.update(id(part) for part in node.values)
            found.append((node.lineno, "".join(parts)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            found.append((node.lineno, node.value))
    return found


def statements_in(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, text) of every string in `source` that reads as an SQL statement."""
    return sorted(
        (line, text) for line, text in string_texts(ast.parse(source, filename)) if STATEMENT.match(text.strip())
    )


def statements_by_file(root: Path) -> dict[str, list[tuple[int, str]]]:
    files = sorted(path for package in PACKAGES for path in (root / package).rglob("*.py"))
    found = {}
    for path in files:
        relative = path.relative_to(root).as_posix()
        found[relative] = statements_in(path.read_text(), relative)
    return found


def misplaced(root: Path) -> list[str]:
    """file:line and the statement's start, for every statement outside its homes."""
    return [
        f"{relative}:{line}: {' '.join(text.split())[:60]}"
        for relative, statements in statements_by_file(root).items()
        if not is_home(relative)
        for line, text in statements
    ]


def test_every_sql_statement_lives_in_its_package_s_queries():
    assert misplaced(ROOT) == [], "SQL outside jobqueue/queries.py, faces/queries.py (name it there)"


def test_the_homes_hold_the_statements():
    """Not vacuous: the scan finds the statements where they live."""
    found = statements_by_file(ROOT)
    assert len(found) > 20
    assert len(found["jobqueue/queries.py"]) >= 30
    assert len(found["faces/queries.py"]) >= 5
    assert found["momentlens/devservices/postgres.py"]


def test_a_statement_anywhere_is_found_and_prose_is_not():
    source = '''
LOOKUP = "SELECT id FROM photos WHERE id = %s"


def purge(cursor, table):
    cursor.execute(f"DELETE FROM {table}")
    cursor.execute("""
        WITH gone AS (SELECT 1) SELECT * FROM gone
    """)
    cursor.execute("UPDATE photos SET processed_at = NULL")
    message = "Select a photo, then update it"
    word = "SELECT"
    hint = "Delete the file"
'''
    assert [line for line, _ in statements_in(source)] == [2, 6, 7, 10]
    assert statements_in('cursor.execute("DELETE FROM pgmq.q_jobs WHERE msg_id = %s")')[0][1].startswith("DELETE")


def test_a_statement_outside_its_home_is_named_by_file_and_line(tmp_path):
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "jobqueue" / "queries.py").write_text('READ = "SELECT msg_id FROM pgmq.read(%s, %s, 1)"\n')
    (tmp_path / "faces" / "checks.py").write_text('\n\nVERSION = "SELECT extversion FROM pg_extension"\n')
    assert misplaced(tmp_path) == ["faces/checks.py:3: SELECT extversion FROM pg_extension"]


# -- the queue's tables ---------------------------------------------------------------------------------------------

# A pgmq relation a statement names: `pgmq.name` not followed by `(` (a function: pgmq.read(...)).
PGMQ_RELATION = re.compile(r"\bpgmq\.(\w+)\b(?!\s*\()")


def test_the_queue_s_tables_are_spelt_from_its_name():
    assert queries.QUEUE_TABLE == f"pgmq.q_{queries.QUEUE}"
    assert queries.ARCHIVE_TABLE == f"pgmq.a_{queries.QUEUE}"
    assert queries.WAITING_INDEX == f"{queries.QUEUE_TABLE}_waiting_idx"
    assert queries.MESSAGE_INDEX == f"{queries.QUEUE_TABLE}_message_idx"


def test_every_queue_statement_names_only_the_queue_s_tables():
    """A statement pgmq has no function for names the queue's table directly (READ_FIRST, DELETE, ...): the one
    QUEUE_TABLE or ARCHIVE_TABLE spells, never another queue's."""
    named = {
        f"pgmq.{relation}"
        for _, text in statements_by_file(ROOT)["jobqueue/queries.py"]
        for relation in PGMQ_RELATION.findall(text)
    }
    assert named == {queries.QUEUE_TABLE, queries.ARCHIVE_TABLE}
    assert queries.QUEUE_TABLE in queries.READ_FIRST
