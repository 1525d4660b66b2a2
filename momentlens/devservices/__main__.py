"""`python -m momentlens.devservices stop [VAR_DIR ...]` (`make stop`): stop the embedded PostgreSQL servers.

The embedded defaults start a server on first use and leave it running for the next
command; this stops the one under each var folder (default: MOMENTLENS_VAR_DIR when it is set, else var/, and
the demo's var/demo/).
"""

import os
import sys
from pathlib import Path

from momentlens.devservices.postgres import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VAR_DIRS = (Path(os.environ.get("MOMENTLENS_VAR_DIR", ROOT / "var")), ROOT / "var" / "demo")


def stop(var_dirs: list[Path]) -> None:
    for var_dir in var_dirs:
        server = EmbeddedPostgres(var_dir / "postgres")
        if server.running:
            server.stop()
            print(f"stopped the embedded PostgreSQL in {server.pgdata}")
        else:
            print(f"no embedded PostgreSQL running in {server.pgdata}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["stop"]:
        sys.exit("usage: python -m momentlens.devservices stop [VAR_DIR ...]")
    stop([Path(arg) for arg in sys.argv[2:]] or list(DEFAULT_VAR_DIRS))
