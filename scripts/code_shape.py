"""The shape of the code, per package: modules, lines, and the longest function (for reviews of structure work).

python scripts/code_shape.py [ROOT]
"""

import ast
import sys
from pathlib import Path

PACKAGES = ("faces", "jobqueue", "momentlens", "demo", "bench", "tests", "tests/chaos")


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


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    print("| package | modules | lines | longest function |")
    print("|---|---:|---:|---|")
    for package in PACKAGES:
        if (root / package).is_dir():
            modules, lines, longest = shape(root, package)
            print(f"| {package} | {modules} | {lines} | {longest} |")


if __name__ == "__main__":
    main()
