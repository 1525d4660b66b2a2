"""Coverage-guided fuzzing (atheris) of the worker's two parsers of untrusted input.

- `faces.media.still.Still(bytes)`: an upload's bytes, decoded as a viewer sees them, and the scan
  of what else they hold;
- `jobqueue.messages.decode(str)` then `job_of`: a queue message's body, as the worker reads it, with the real job
  names registered.

Either returns (a uint8 HxWx3 image within MEDIA_LIMITS.still_pixels; a Job) or raises a
PermanentJobError; anything else is a finding, and atheris stops with the input that
caused it (written to ./crash-*). A run by hand, not a test and not a benchmark table:

    python bench/fuzz_decode.py -atheris_runs=20000 [-max_total_time=60] [CORPUS_DIR ...]

Without a corpus folder, a temporary one is seeded with the small sample image in six
formats and a few messages. The first input byte chooses the target (even: image,
odd: message).

atheris is not in requirements-dev.txt: install it by hand (a binary wheel exists for
CPython 3.12 on manylinux x86_64).
"""

import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
# OpenCV logs every refused input; Pillow warns about corrupt EXIF and large headers. Refusing is the point here.
os.environ.setdefault("OPENCV_LOG_LEVEL", "SILENT")
warnings.simplefilter("ignore")

with atheris.instrument_imports(include=["jobqueue", "faces.media", "PIL", "json", "uuid"]):
    import django

    django.setup()
    import cv2
    import numpy as np
    from PIL import Image

    Image.init()  # Pillow imports its format plugins lazily: import them here, instrumented

    import faces.jobs  # noqa: F401  (registers the real handlers)
    from faces.media.still import Still
    from faces.media.upload import MEDIA_LIMITS
    from jobqueue import messages
    from jobqueue.errors import PermanentJobError


def check_image(data: bytes) -> None:
    try:
        still = Still(data)
        image = still.image
        still.why_rendered  # noqa: B018  (the scan of what else the bytes hold must not break on them either)
    except PermanentJobError:
        return
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise AssertionError(f"Still(data).image is {image.dtype} {image.shape}")
    if image.shape[0] * image.shape[1] > MEDIA_LIMITS.still_pixels:
        raise AssertionError(f"Still(data).image is {image.shape}, over MEDIA_LIMITS.still_pixels")


def check_message(body: str) -> None:
    try:
        job = messages.job_of(messages.decode(body))
    except PermanentJobError:
        return
    if not messages.is_uuid(job.payload[job.type.id_field]):
        raise AssertionError(f"a {job.name} whose {job.type.id_field} is not a uuid")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    if data[0] % 2 == 0:
        check_image(data[1:])
    else:
        check_message(data[1:].decode("utf-8", errors="replace").replace("\x00", ""))


def seed_corpus(folder: Path) -> None:
    from momentlens.devservices import samples

    image = samples.tom_hanks()
    for ext in (".jpg", ".png", ".webp", ".tiff", ".bmp", ".jp2"):
        ok, encoded = cv2.imencode(ext, image)
        if ok:
            (folder / f"image{ext}").write_bytes(b"\x00" + encoded.tobytes())
    bodies = [
        {"job": "face_process", "photo_id": "6f1c7e0e-0000-4000-8000-000000000001"},
        {"job": "reprocess_event", "event_id": "6f1c7e0e-0000-4000-8000-000000000001"},
        {"job": "reference_process", "reference_id": "6f1c7e0e00004000800000000000000a"},
        {"job": "thumbnail_dims", "photo_id": None, "extra": [1, 2.5, {"a": "b"}]},
    ]
    for index, body in enumerate(bodies):
        (folder / f"message{index}.json").write_bytes(b"\x01" + json.dumps(body).encode())


def main() -> None:
    argv = list(sys.argv)
    if not any(not arg.startswith("-") for arg in argv[1:]):
        corpus = Path(tempfile.mkdtemp(prefix="fuzz-decode-corpus-"))
        seed_corpus(corpus)
        argv.append(str(corpus))
        print(f"seed corpus: {corpus}", flush=True)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
