"""x264's options for the worker's MP4s: what each costs, how large and how faithful its file is.

Both of bench/media.py's scenes (the drifting group, the walking pair) at 1080p, decoded once; every frame encoded
again as the worker does (yuv420p, the upload's frame rate) with each variant of faces.media.upload.MediaLimits'
x264_options: on one x264 thread (its CPU seconds: what the work costs a machine whose cores are busy) and on x264's
own threads (its wall seconds). Size is the MP4's; fidelity the luma PSNR of every 15th frame against the upload's
decoded frame. Ratios are against "veryfast" at CRF 20 (the worker's options before this table), in the same run.

Usage: python bench/video_encoder.py [--seconds 6] [--size 1080p]
"""

import argparse
import io
import os
import resource
import sys
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--size", choices=sorted(media.SIZES), default="1080p")
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
        stream = container.add_stream("libx264", rate=media.FPS, options=options)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, media.FPS)
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


def luma_psnr(upload, encoded, height: int) -> float:
    a, b = (frame.to_ndarray(format="yuv420p")[:height].astype(np.float32) for frame in (upload, encoded))
    return float(10 * np.log10(255**2 / max(float(np.mean((a - b) ** 2)), 1e-9)))


if __name__ == "__main__":
    main()
