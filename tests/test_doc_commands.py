"""Every command the docs print runs: each `python SCRIPT` and `python manage.py COMMAND` line of a shell block in
README.md, docs/ and bench/README.md names a script or command that exists, and every option the docs give it is one
its --help lists. (tests/unit/test_doc_pointers.py and test_doc_names.py check the docs' other pointers.)"""

import re
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:sh|bash|console)\n(.*?)```", re.S)
OPTION = re.compile(r"^--[a-z][a-z0-9-]*")


def printed_commands() -> dict[tuple[str, ...], set[str]]:
    """(script,) or ("manage.py", command) -> the options the docs give it, from every shell block."""
    commands: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for doc in DOCS:
        for block in SHELL_BLOCK.findall(doc.read_text()):
            for line in block.splitlines():
                words = _words(line)
                if len(words) < 2 or Path(words[0]).name not in ("python", "python3.12") or words[1] == "-m":
                    continue
                target = (words[1], words[2]) if words[1] == "manage.py" else (words[1],)
                given = words[len(target) + 1 :]
                commands[target] |= {match.group() for word in given if (match := OPTION.match(word))}
    return dict(commands)


def _words(line: str) -> list[str]:
    """A line's words, without its comment, an `[optional part]` or what follows a pipe or `&&`."""
    line = re.sub(r"\s#.*$", "", line)
    line = re.sub(r"\[[^\]]*\]", "", line)
    line = re.split(r"\s(?:\||&&|;|>)\s", line)[0]
    try:
        return shlex.split(line)
    except ValueError:
        return []


COMMANDS = printed_commands()


def test_the_docs_print_commands():
    assert ("bench/media.py",) in COMMANDS
    assert ("manage.py", "measure_thresholds") in COMMANDS


@pytest.mark.parametrize("target", sorted(COMMANDS), ids=" ".join)
def test_a_printed_command_runs_with_the_options_the_docs_give_it(target):
    options = COMMANDS[target]
    script = ROOT / target[0]
    assert script.is_file(), f"{target[0]} is printed in the docs but is no file"
    if target[0] != "manage.py" and "argparse" not in script.read_text():
        assert not options, f"{target[0]} takes no options, the docs give it {sorted(options)}"
        return
    result = subprocess.run(
        [sys.executable, *target, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout[-1500:] + result.stderr[-1500:]
    listed = set(re.findall(r"--[a-z][a-z0-9-]*", result.stdout))
    assert options <= listed, f"{' '.join(target)}: the docs give it {sorted(options - listed)}, its --help has not"
