"""x264's options for the worker's MP4s: what each costs, how large and how faithful its file is.

Both of bench/media.py's scenes (the drifting group, the walking pair) at 1080p, decoded once; every frame encoded
again as the worker does (yuv420p, the upload's frame rate) with each variant of faces.media.upload.MediaLimits'
x264_options: on one x264 thread (its CPU seconds: what the work costs a machine whose cores are busy) and on x264's
own threads (its wall seconds). Size is the MP4's; fidelity the luma PSNR of every 15th frame against the upload's
decoded frame. Ratios are against "veryfast" at CRF 20 (the worker's options before this table), in the same run.

Then the encoders side by side: every frame encoded into one and three MP4s with the worker's options, the outputs
fed in turn by one thread, each x264 on its own count of threads (the worker before), or side by side, a thread
each, the cores split between them (faces/media/video.py now), all of a frame's encodes ended before the next
frame as the worker does.

Usage: python bench/video_encoder.py [--seconds 6] [--size 1080p] [--repeats 5]
"""

import argparse
import io
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import media  # noqa: E402

BEFORE = {"preset": "veryfast", "crf": "20"}
VARIANTS = {
    "veryfast": BEFORE,
    "veryfast, me=dia": {**BEFORE, "x264-params": "me=dia"},
    "veryfast, subme=1": {**BEFORE, "x264-params": "subme=1"},
    "veryfast, subme=1, me=dia": {**BEFORE, "x264-params": "subme=1:me=dia"},
    "superfast, mbtree": {"preset": "superfast", "crf": "20", "x264-params": "mbtree=1:rc-lookahead=10"},
    "superfast": {"preset": "superfast", "crf": "20"},
}
SAMPLED = 15  # every this many frames compared
OUTPUTS = (1, 3)  # a clip with no DNP member in it; with two (the public file and each one's own)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--size", choices=sorted(media.SIZES), default="1080p")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each way of feeding the encoders")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    from faces.media.upload import MEDIA_LIMITS

    width, height = media.SIZES[args.size]
    print(f"\n## x264 options: {args.seconds:g} s {args.size} clips, {media.FPS} fps\n")
    print(f"The worker's options now: `{dict(MEDIA_LIMITS.x264_options)}`.\n")
    print("| scene | options | CPU s, one thread | ratio | wall s, x264's threads | MB | ratio | luma PSNR dB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for scene in media.SCENES:
        frames = decoded(media.video_clip(width, height, args.seconds, scene))
        before = None
        for name, options in VARIANTS.items():
            cpu, _, size, psnr = encoded(frames, {**options, "threads": "1"}, width, height)
            _, wall, _, _ = encoded(frames, options, width, height)
            before = before or (cpu, size)
            print(
                f"| {scene} | {name} | {cpu:.2f} | {cpu / before[0]:.2f} | {wall:.2f} | {size / 1e6:.2f} | "
                f"{size / before[1]:.2f} | {psnr:.2f} |"
            )
    print_side_by_side(width, height, args.seconds, dict(MEDIA_LIMITS.x264_options), args.repeats)


def print_side_by_side(width: int, height: int, seconds: float, options: dict, repeats: int) -> None:
    """A clip's outputs fed the worker's way (faces/media/video.py): each frame to every output, all of a frame's
    encodes ended before the next frame; in turn on one thread (the worker before) or side by side, a thread each
    and the cores split between the encoders (the worker now: `side_by_side`), the two ways taken in turn `repeats`
    times. The median run's wall seconds, and the CPU seconds it took."""
    print("\n## Encoders side by side: every frame to each of a clip's outputs, the worker's options\n")
    print("| scene | outputs | fed | wall s | CPU s | wall ratio vs in turn |")
    print("|---|---:|---|---:|---:|---:|")
    for scene in media.SCENES:
        frames = decoded(media.video_clip(width, height, seconds, scene))
        for outputs in OUTPUTS:
            runs = [
                [outputs_fed(frames, options, width, height, outputs, side_by_side=way) for way in (False, True)]
                for _ in range(repeats)
            ]
            in_turn, side_by_side = (median_run([run[way] for run in runs]) for way in (0, 1))
            for name, (wall, cpu) in (("in turn", in_turn), ("side by side", side_by_side)):
                print(f"| {scene} | {outputs} | {name} | {wall:.2f} | {cpu:.2f} | {wall / in_turn[0]:.2f} |")


def median_run(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return sorted(runs)[len(runs) // 2]


def outputs_fed(frames: list, options: dict, width: int, height: int, outputs: int, side_by_side: bool):
    """(wall seconds, CPU seconds) of every frame encoded into `outputs` MP4s."""
    import av

    from faces.media.video import side_by_side as split

    each = split(options, outputs) if side_by_side else options
    containers = [av.open(io.BytesIO(), "w", format="mp4") for _ in range(outputs)]
    streams = [h264(container, dict(each), width, height) for container in containers]

    def write(index: int, frame) -> None:
        containers[index].mux(streams[index].encode(frame))

    before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with ThreadPoolExecutor(outputs) as encoders:
        for number, frame in enumerate(frames):
            frame.pts, frame.time_base = number, Fraction(1, media.FPS)
            if side_by_side:
                wait([encoders.submit(write, index, frame) for index in range(outputs)])
            else:
                for index in range(outputs):
                    write(index, frame)
        for index in range(outputs):
            write(index, None)
    wall, after = time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF)
    for container in containers:
        container.close()
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def decoded(data: bytes) -> list:
    import av

    with av.open(io.BytesIO(data)) as container:
        return list(container.decode(video=0))


def encoded(frames: list, options: dict, width: int, height: int) -> tuple[float, float, int, float]:
    """(CPU seconds, wall seconds, bytes, luma PSNR) of one encode of `frames` with `options`."""
    import av

    out = io.BytesIO()
    before, began = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    with av.open(out, "w", format="mp4") as container:
        stream = h264(container, options, width, height)
        for index, frame in enumerate(frames):
            frame.pts, frame.time_base = index, Fraction(1, media.FPS)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    wall, after = time.perf_counter() - began, resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with av.open(io.BytesIO(out.getvalue())) as container:
        again = list(container.decode(video=0))
    psnr = np.mean([luma_psnr(a, b, height) for a, b in zip(frames[::SAMPLED], again[::SAMPLED], strict=True)])
    return cpu, wall, len(out.getvalue()), float(psnr)


def h264(container, options: dict, width: int, height: int):
    """An H.264 stream of `container` as the worker writes one: yuv420p, the clip's frame rate as its time base."""
    stream = container.add_stream("libx264", rate=media.FPS, options=options)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    stream.time_base = stream.codec_context.time_base = Fraction(1, media.FPS)
    return stream


def luma_psnr(upload, encoded, height: int) -> float:
    a, b = (frame.to_ndarray(format="yuv420p")[:height].astype(np.float32) for frame in (upload, encoded))
    return float(10 * np.log10(255**2 / max(float(np.mean((a - b) ** 2)), 1e-9)))


if __name__ == "__main__":
    main()
