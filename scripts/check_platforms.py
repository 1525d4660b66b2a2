"""Check that every pin of requirements-dev.txt resolves to a wheel on each platform the team uses.

Platforms: Linux x86-64 (the server, WSL2), Linux ARM64, macOS ARM64 (an M1), all on
CPython 3.12. For each, pip resolves the pins as an install for that platform with
`--dry-run --only-binary=:all:`: it reads the index and the wheels' metadata, and
installs and downloads nothing else. A pin with no wheel for a platform fails here,
before anyone's `make test` does.

Usage: python scripts/check_platforms.py [requirements file]
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def manylinux(arch: str, newest_glibc: int = 35) -> list[str]:
    """Every manylinux tag a glibc 2.35 system (Ubuntu 22.04, WSL2's default) accepts: pip does not expand them."""
    return [f"manylinux_2_{minor}_{arch}" for minor in range(newest_glibc, 16, -1)] + [f"manylinux2014_{arch}"]


# pip expands a macOS tag to the older macOS versions itself.
PLATFORMS = {
    "Linux x86-64": manylinux("x86_64"),
    "Linux ARM64": manylinux("aarch64"),
    "macOS ARM64": ["macosx_14_0_arm64"],
}


def resolve(requirements: Path, platform_tags: list[str]) -> tuple[bool, list[str], str]:
    """(resolved?, the wheel file of each pin, pip's error)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        done = subprocess.run(
            [
                sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                "--only-binary=:all:", *(f"--platform={tag}" for tag in platform_tags), "--python-version", "3.12",
                "--implementation", "cp", "--abi", "cp312", "--target", str(Path(folder) / "target"),
                "--quiet", "--report", str(report), "-r", str(requirements),
            ],
            capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            return False, [], "; ".join(errors) or done.stderr[-500:]
        wheels = [item["download_info"]["url"].rsplit("/", 1)[-1] for item in json.loads(report.read_text())["install"]]
        return True, wheels, ""


def main() -> int:
    requirements = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "requirements-dev.txt"
    failed = 0
    print("| platform | newest tag | result |\n|---|---|---|")
    for name, tags in PLATFORMS.items():
        ok, wheels, error = resolve(requirements, tags)
        failed += not ok
        print(f"| {name} | `{tags[0]}` | {f'{len(wheels)} wheels' if ok else f'FAILED: {error}'} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
