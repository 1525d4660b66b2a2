"""Write the identity set `measure_thresholds` was run on for docs/ARCHITECTURE.md §6.

Usage: python scripts/make_identity_set.py OUT_DIR [--per-person 6]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from momentlens.devservices.samples import write_identity_set

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out_dir", type=Path)
parser.add_argument("--per-person", type=int, default=6)
args = parser.parse_args()
print(write_identity_set(args.out_dir, per_person=args.per_person))
