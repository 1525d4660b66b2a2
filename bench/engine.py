"""What one `analyze` (detection, small faces included, + embedding) costs by photo size, in time and
memory, and what loading the engine per job would cost.

1. For each size (insightface's t1.jpg, six faces, resized to 1, 12, 24 and 48 MP) a fresh
   process starts the engine (timed: sessions, and on a GPU the warm-up of every shape), analyses
   the photo once (cold: the first photo) and WARM_RUNS more times (warm: their median), and
   reports faces, the share spent embedding, its peak RSS (`ru_maxrss`) beside the RSS before
   the first analyze, and on a GPU the process's peak GPU memory (nvidia-smi). Ratio against
   1 MP, and seconds per megapixel: time should grow no faster than the pixel count.
2. Cold load per job vs a resident engine on the 1 MP image.
Each provider set named with --providers gets its own rows in the same run, the CPU alone last (added
if not named), and the first against the last, size by size (a GPU box: `--providers
CUDAExecutionProvider,CPUExecutionProvider`: CUDA against one CPU core). A set this onnxruntime cannot
run is named and skipped.

Usage: python bench/engine.py [--threads 1] [--providers P[,P...] ...] [--sizes 1,12,24,48] [--warm-runs 5]
       [--cold-runs 3]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLD_RUNS = 3
WARM_RUNS = 5
CPU = "CPUExecutionProvider"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra_op_threads")
    parser.add_argument("--providers", nargs="+", default=[CPU], help="provider sets; the CPU alone is added last")
    parser.add_argument("--sizes", default="1,12,24,48", help="megapixels, comma-separated")
    parser.add_argument("--warm-runs", type=int, default=WARM_RUNS, help="photos after the first, per size")
    parser.add_argument("--cold-runs", type=int, default=COLD_RUNS, help="loads per job against resident runs")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one measurement in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(json.loads(args.one))))
        return
    started = time.perf_counter()
    sizes = [float(mp) for mp in args.sizes.split(",")]
    measured = {}
    for providers in with_one_cpu_core(args.providers):
        if missing := unavailable(providers):
            print(f"\n## {providers}: not measured: onnxruntime here has no {missing}")
            continue
        measured[providers] = [child(providers, args.threads, mp, args.warm_runs) for mp in sizes]
        print_sizes(providers, args.threads, measured[providers], args.warm_runs)
        print_cold(providers, args.threads, args.cold_runs)
    if len(measured) > 1:
        first, *_, last = measured
        print_against(first, last, measured, args.threads)
    print(f"\nTotal runtime {time.perf_counter() - started:.0f} s.")


def with_one_cpu_core(provider_sets: list[str]) -> list[str]:
    """The provider sets asked for, the CPU alone last (the baseline every other set is set against)."""
    return provider_sets if provider_sets[-1] == CPU else [*provider_sets, CPU]


def unavailable(providers: str) -> str | None:
    """The first provider of the set that this onnxruntime cannot run (a CPU build has no CUDA)."""
    import onnxruntime

    return next((name for name in providers.split(",") if name not in onnxruntime.get_available_providers()), None)


def child(providers: str, threads: int, megapixels: float, warm_runs: int) -> dict:
    spec = json.dumps({"providers": providers, "threads": threads, "megapixels": megapixels, "warm_runs": warm_runs})
    done = subprocess.run(
        [sys.executable, __file__, "--one", spec], check=True, capture_output=True, text=True, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_one(spec: dict) -> dict:
    import resource

    began = time.perf_counter()
    engine = load_engine(spec["providers"], spec["threads"])
    start_s = time.perf_counter() - began
    image = resized_to(group_photo(), spec["megapixels"])
    embed_s = timed_embedding(engine)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    runs = []
    for _ in range(1 + spec["warm_runs"]):
        embed_s[0] = 0.0
        began = time.perf_counter()
        faces = engine.analyze(image)
        runs.append((time.perf_counter() - began, embed_s[0]))
    warm = sorted(runs[1:])[len(runs[1:]) // 2]
    return {
        "megapixels": image.shape[0] * image.shape[1] / 1e6,
        "size": f"{image.shape[1]}x{image.shape[0]}",
        "faces": len(faces),
        "start_s": start_s,
        "cold_s": runs[0][0],
        "seconds": warm[0],
        "embed_s": warm[1],
        "rss_before_mb": rss_before / 1024,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "gpu_mb": gpu_memory_mb(),
    }


def gpu_memory_mb() -> float | None:
    """This process's GPU memory now (onnxruntime's arena keeps its peak), from nvidia-smi; None without one."""
    import os
    import shutil

    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
    )
    for line in done.stdout.splitlines():
        pid, _, used = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return float(used)
    return None


def print_sizes(providers: str, threads: int, rows: list[dict], warm_runs: int) -> None:
    print(f"\n## analyze by photo size ({providers}, {threads} thread(s), t1.jpg resized)\n")
    print(
        f"Start: the engine built (and on a GPU every shape warmed up). Cold: the first photo. Warm: the median "
        f"of the next {warm_runs}.\n"
    )
    print(
        "| image | faces | start s | cold s | warm s | of which embedding s | s per MP | ratio vs 1 MP "
        "| RSS before MB | peak RSS MB | GPU MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = rows[0]["seconds"]
    for row in rows:
        gpu = "-" if row["gpu_mb"] is None else f"{row['gpu_mb']:.0f}"
        print(
            f"| {row['megapixels']:.1f} MP ({row['size']}) | {row['faces']} | {row['start_s']:.2f} | "
            f"{row['cold_s']:.2f} | {row['seconds']:.2f} | {row['embed_s']:.3f} | "
            f"{row['seconds'] / row['megapixels']:.3f} | {row['seconds'] / base:.2f} | "
            f"{row['rss_before_mb']:.0f} | {row['peak_mb']:.0f} | {gpu} |"
        )


def print_against(first: str, last: str, measured: dict, threads: int) -> None:
    print(f"\n## {first} against {last} ({threads} thread(s)), warm and cold\n")
    print(f"| image | {first} warm s | {last} warm s | speed-up warm | {first} cold s | {last} cold s |")
    print("|---|---:|---:|---:|---:|---:|")
    for ours, theirs in zip(measured[first], measured[last], strict=True):
        print(
            f"| {ours['megapixels']:.1f} MP | {ours['seconds']:.3f} | {theirs['seconds']:.3f} | "
            f"{theirs['seconds'] / ours['seconds']:.1f}x | {ours['cold_s']:.2f} | {theirs['cold_s']:.2f} |"
        )


def print_cold(providers: str, threads: int, runs: int) -> None:
    engine = load_engine(providers, threads)
    image = resized_to(group_photo(), 1)
    engine.analyze(image)
    resident, cold = [], []
    for _ in range(runs):
        began = time.perf_counter()
        engine.analyze(image)
        resident.append(time.perf_counter() - began)
        began = time.perf_counter()
        load_engine(providers, threads).analyze(image)
        cold.append(time.perf_counter() - began)
    print(f"\n## Cold load per job vs resident engine (1 MP, {providers}, {runs} runs each)\n")
    print("| per job | mean s | best s | ratio vs resident (mean) |")
    print("|---|---:|---:|---:|")
    for label, values in (("resident engine: analyze only (baseline)", resident), ("cold: load + analyze", cold)):
        mean = statistics.mean(values)
        print(f"| {label} | {mean:.3f} | {min(values):.3f} | {mean / statistics.mean(resident):.2f} |")


def load_engine(providers: str, threads: int):
    """buffalo_s as build_engine builds it, with these providers and threads. Built without Django's
    settings, so that the bench runs wherever the engine's own packages are (a GPU box)."""
    import os

    from faces.engines.insightface import InsightFaceEngine
    from faces.engines.packs import BUFFALO_S, pack_folder

    root = Path(os.environ.get("FACE_MODEL_ROOT", ROOT / "var" / "models"))
    return InsightFaceEngine(
        BUFFALO_S, pack_folder(BUFFALO_S, root), intra_op_threads=threads, providers=providers.split(",")
    )


def timed_embedding(engine) -> list[float]:
    """Wraps the engine's embed_many; the returned cell holds the seconds spent in it."""
    spent = [0.0]
    embed_many = engine.embed_many

    def timed(image, detections):
        began = time.perf_counter()
        try:
            return embed_many(image, detections)
        finally:
            spent[0] += time.perf_counter() - began

    engine.embed_many = timed
    return spent


def group_photo():
    from momentlens.devservices import samples

    return samples.group_photo()


def resized_to(image, megapixels: float):
    """`image` scaled, aspect kept, to about `megapixels`."""
    import cv2

    height, width = image.shape[:2]
    scale = (megapixels * 1e6 / (width * height)) ** 0.5
    size = (round(width * scale), round(height * scale))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


if __name__ == "__main__":
    main()
