"""One person per track: how unlike may two clearly seen faces be and still be linked as one person?

A clip's sightings link into tracks (faces/tracks.py); a track is judged as one person (the bag rule,
faces/people.py). A link between two people is wrong data (one person's faces stored as the other's); a
track split where it is one person leaves each piece to be judged on its own faces. The link refuses two
sightings that are both seen clearly (faces.thresholds: wide enough, not turned, a strong embedding) and
whose similarity is under faces.tracks.Tracking.link_agreement.

This measures that gate on the real-faces set (`scripts/make_real_faces_set.py`): every pair of clearly
seen faces of one person (different photos, often years apart: far harder than two frames of one clip) and
every pair of clearly seen faces of two people. Per gate: the share of one person's pairs it would split, and
the share of two people's pairs it refuses (the rest still rely on speed, size and the cut).

Usage: python bench/track_links.py [SET_DIR] [--photos-per-person N] [--people N]
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GATES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set_dir", nargs="?", type=Path, default=ROOT / "var" / "real-faces")
    parser.add_argument("--photos-per-person", type=int, default=12)
    parser.add_argument("--people", type=int, default=0, help="0: everyone in the set")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from faces.engines import resident_engine
    from faces.measurement.probes import read_set, spread
    from faces.thresholds import for_engine
    from faces.tracks import TRACKING

    started = time.perf_counter()
    engine = resident_engine()
    thresholds = for_engine(engine.name)
    people = sorted(path for path in args.set_dir.iterdir() if path.is_dir() and not path.name.startswith("group_"))
    if not people:
        raise SystemExit(f"no people under {args.set_dir}: python scripts/make_real_faces_set.py {args.set_dir}")
    people = people[: args.people] if args.people else people
    with tempfile.TemporaryDirectory(prefix="track-links-") as folder:
        for person in people:
            (Path(folder) / person.name).mkdir()
            for photo in spread(sorted(person.iterdir()), args.photos_per_person):
                (Path(folder) / person.name / photo.name).symlink_to(photo.resolve())
        probes = [one for one in read_set(engine, Path(folder)) if not thresholds.seen_poorly(one.quality)]
    same, strangers = pair_similarities(probes)
    print(f"\n## One person per track: {len(probes)} clearly seen faces of {len(people)} people, {engine.name}\n")
    print(f"Pairs: {len(same)} of one person (different photos), {len(strangers)} of two people.\n")
    print("| gate (similarity under it: no link) | one person's pairs split | two people's pairs refused |")
    print("|---:|---:|---:|")
    for gate in sorted({*GATES, TRACKING.link_agreement}):
        mark = " (the worker's)" if gate == TRACKING.link_agreement else ""
        print(f"| {gate:.2f}{mark} | {share(same < gate)} | {share(strangers < gate)} |")
    print(f"\none person, lowest: {same.min():.3f}; two people, highest: {strangers.max():.3f}")
    print(f"({time.perf_counter() - started:.0f} s)")


def pair_similarities(probes) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity of every pair of probes: (one person's pairs, two people's pairs)."""
    embeddings = np.array([one.embedding for one in probes], dtype=np.float32)
    names = np.array([one.person for one in probes])
    similarity = embeddings @ embeddings.T
    upper = np.triu(np.ones_like(similarity, dtype=bool), k=1)
    one_person = names[:, None] == names[None, :]
    return similarity[upper & one_person], similarity[upper & ~one_person]


def share(hits: np.ndarray) -> str:
    return f"{int(hits.sum())}/{hits.size} ({100 * hits.mean() if hits.size else 0:.2f}%)"


if __name__ == "__main__":
    main()
