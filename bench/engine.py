"""What one `analyze` (tiled detection + embedding) costs by photo size, and what loading the engine per job would cost.

1. `PortableEngine.analyze` on insightface's t1.jpg (six faces) resized, aspect kept,
   to 1, 12 and 24 MP: faces found, detector passes, seconds (best of 3 at 1 MP,
   best of 2 above) and the share of it spent embedding; ratio against 1 MP.
2. Cold load per job vs a resident engine on the 1 MP image: constructing
   `PortableEngine` and analysing (a new engine each time, in this process, modules
   already imported) vs analysing with an engine already loaded; plus, for scale, a
   new Python process per job (interpreter start, imports, load, analyze).

Usage: python bench/engine.py [--threads 1]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SIZES_MP = (1, 12, 24)
COLD_RUNS = 3

PROCESS_JOB = """
import sys
sys.path.insert(0, {root!r})
import cv2
from faces.engines.portable import PortableEngine
print(len(PortableEngine(intra_op_threads={threads}).analyze(cv2.imread({image!r}, cv2.IMREAD_COLOR))))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra_op_threads")
    parser.add_argument("--no-process", action="store_true", help="skip the new-process-per-job row")
    args = parser.parse_args()

    import dlib  # noqa: F401  imported before any timing: a worker imports once, whatever it loads
    import onnxruntime  # noqa: F401
    from faces.engines.portable import PortableEngine

    from momentlens.devservices import samples

    started = time.perf_counter()
    group = samples.group_photo()
    images = {mp: resized_to(group, mp) for mp in SIZES_MP}

    engine = PortableEngine(intra_op_threads=args.threads)
    counter = Counter(engine)
    engine.analyze(images[1])  # the first run allocates; it is the cold rows' business, not these
    sizes = []
    for mp in SIZES_MP:
        runs = [counter.analyze(images[mp]) for _ in range(3 if mp == 1 else 2)]
        sizes.append((mp, min(runs, key=lambda run: run[0])))

    resident = [counter.analyze(images[1])[0] for _ in range(COLD_RUNS)]
    cold = []
    for _ in range(COLD_RUNS):
        began = time.perf_counter()
        PortableEngine(intra_op_threads=args.threads).analyze(images[1])
        cold.append(time.perf_counter() - began)
    process = [] if args.no_process else process_per_job(images[1], args.threads)

    print(f"\n## analyze by photo size (t1.jpg resized, {args.threads} thread(s))\n")
    print("| image | pixels | faces | detector passes | best s | of which embedding s | ratio vs 1 MP |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    base_s = sizes[0][1][0]
    for mp, (seconds, embed_s, faces, passes) in sizes:
        height, width = images[mp].shape[:2]
        print(
            f"| {mp} MP{' (baseline)' if mp == 1 else ''} ({width}x{height}) | {width * height / 1e6:.1f} MP | "
            f"{faces} | {passes} | {seconds:.3f} | {embed_s:.3f} | {seconds / base_s:.2f} |"
        )

    print(f"\n## Cold load per job vs resident engine (1 MP, {COLD_RUNS} runs each)\n")
    print("| per job | mean s | best s | ratio vs resident (mean) |")
    print("|---|---:|---:|---:|")
    rows = [
        ("resident engine: analyze only (baseline)", resident),
        ("cold: construct PortableEngine + analyze", cold),
    ]
    if process:
        rows.append(("new process: interpreter + imports + construct + analyze", process))
    mean_resident = statistics.mean(resident)
    for label, values in rows:
        mean = statistics.mean(values)
        print(f"| {label} | {mean:.3f} | {min(values):.3f} | {mean / mean_resident:.2f} |")
    print(f"\nTotal runtime {time.perf_counter() - started:.0f} s.")


class Counter:
    """Times `engine.analyze`, counting detector passes and the seconds spent embedding."""

    def __init__(self, engine):
        self.engine = engine
        self.passes = 0
        self.embed_s = 0.0
        detect_once, embed = engine.detect_once, engine.embed

        def counted_detect(image):
            self.passes += 1
            return detect_once(image)

        def timed_embed(image, detection):
            began = time.perf_counter()
            try:
                return embed(image, detection)
            finally:
                self.embed_s += time.perf_counter() - began

        # Instance attributes shadow the methods that FaceEngine.analyze calls through self.
        engine.detect_once, engine.embed = counted_detect, timed_embed

    def analyze(self, image: np.ndarray) -> tuple[float, float, int, int]:
        """(seconds, embedding seconds, faces, detector passes) of one analyze."""
        self.passes, self.embed_s = 0, 0.0
        began = time.perf_counter()
        faces = self.engine.analyze(image)
        return time.perf_counter() - began, self.embed_s, len(faces), self.passes


def resized_to(image: np.ndarray, megapixels: float) -> np.ndarray:
    """`image` scaled, aspect kept, to about `megapixels` (t1.jpg: 12 MP is 4164x2882, 24 MP 5889x4076)."""
    height, width = image.shape[:2]
    scale = (megapixels * 1e6 / (width * height)) ** 0.5
    size = (round(width * scale), round(height * scale))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


def process_per_job(image: np.ndarray, threads: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        path = str(Path(tmp) / "photo.png")
        cv2.imwrite(path, image)
        code = PROCESS_JOB.format(root=str(ROOT), threads=threads, image=path)
        seconds = []
        for _ in range(COLD_RUNS):
            began = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
            seconds.append(time.perf_counter() - began)
        return seconds


if __name__ == "__main__":
    main()
