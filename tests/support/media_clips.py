"""Scripted clips made of real faces, for the animated and video end-to-end tests.

Each clip is a plain canvas with a few of t1.jpg's guests pasted at fixed places (the
"others", a band along the bottom) and t1's leftmost guest (the DNP guest) in a band
along the top. The DNP guest is ABSENT in frame 0, so a worker that only looks at
the first frame sees nobody to blur; it then comes in, walks part way across, leaves
for a few frames, comes back and walks the other way. The clip comes with its script:
for every frame, where the DNP guest's face box is (or None) and where each other
guest's face box is, in pixels of the frame, so a test can check the published pixels
frame by frame. Every frame also carries its index as a row of black and white cells
in the bottom-right corner: no two frames are alike (GIF and WebP encoders merge
identical neighbours, which would change the frame count the test relies on), and a
test can read back which source frame an output frame is.
"""

import io
from dataclasses import dataclass
from fractions import Fraction

import av
import cv2
import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]  # x1, y1, x2, y2 in pixels of the frame

# t1's guests, indexed as `group_faces` (left to right): 0 is the DNP guest, these stand still.
OTHER_GUESTS = (2, 3, 4)
# Around each face box, this fraction of its width / height is kept: the detector needs the
# head and some shoulders to see a face, not a face box cut flush.
CROP_MARGIN = 0.4
INDEX_BITS = 7  # up to 127 frames
DNP_TOP = 4  # the DNP crop's top edge, pixels
DNP_DRIFT = 10  # how far it sinks while walking back


@dataclass(frozen=True)
class ScriptedFrame:
    dnp: Box | None  # the DNP guest's face box, None while they are out of the frame
    others: tuple[Box, ...]  # each other guest's face box, in OTHER_GUESTS order


@dataclass(frozen=True)
class Clip:
    data: bytes
    script: list[ScriptedFrame]
    size: tuple[int, int]  # width, height
    durations_ms: list[int]  # per frame (a video: 1000 / fps each)
    loop: int | None  # an animation's loop count (0: forever); None for a video
    fps: int | None = None  # a video's frame rate


@dataclass(frozen=True)
class Guest:
    """A guest cut out of t1: the pixels, and their face box within them."""

    pixels: np.ndarray
    box: Box


def guest(group: np.ndarray, face_box, scale: float) -> Guest:
    """The face at `face_box` (t1 pixels) with CROP_MARGIN around it, resized by `scale`."""
    x1, y1, x2, y2 = (float(v) for v in face_box)
    pad_x, pad_y = CROP_MARGIN * (x2 - x1), CROP_MARGIN * (y2 - y1)
    height, width = group.shape[:2]
    left, top = max(0, int(x1 - pad_x)), max(0, int(y1 - pad_y))
    right, bottom = min(width, int(x2 + pad_x)), min(height, int(y2 + pad_y))
    crop = group[top:bottom, left:right]
    size = (round((right - left) * scale), round((bottom - top) * scale))
    pixels = cv2.resize(crop, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
    return Guest(pixels, ((x1 - left) * scale, (y1 - top) * scale, (x2 - left) * scale, (y2 - top) * scale))


def background(width: int, height: int) -> np.ndarray:
    """A gentle diagonal gradient, warm grey: no edges, no texture the detector could take for a face."""
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
    shade = 150 + 40 * xs + 20 * ys
    return np.clip(np.dstack([shade - 10, shade, shade + 8]), 0, 255).astype(np.uint8)


def tiles(width: int, height: int, seed: int, cell: int = 48) -> np.ndarray:
    """A wall of grey-brown tiles. Every seed gives the same tiles, as many of each shade, in another order:
    two seeds are two places alike in colour and brightness, differing only in layout (a hard cut the colour
    histogram cannot see)."""
    rows, columns = -(-height // cell), -(-width // cell)
    shades = np.resize(np.arange(95, 165, 10), rows * columns)  # the same multiset for every seed
    order = np.random.default_rng(seed).permutation(shades).reshape(rows, columns)
    grey = np.kron(order, np.ones((cell, cell)))[:height, :width]
    wall = np.dstack([grey - 8, grey, grey + 6]).clip(0, 255).astype(np.uint8)
    return cv2.GaussianBlur(wall, (5, 5), 0)


def index_cell(height: int) -> int:
    return max(8, height // 45)


def stamp_index(frame: np.ndarray, index: int) -> None:
    """Frame `index` as INDEX_BITS black/white cells, least significant bit rightmost, bottom-right corner."""
    height, width = frame.shape[:2]
    cell = index_cell(height)
    top = height - cell - 4
    for bit in range(INDEX_BITS):
        right = width - 4 - bit * cell
        frame[top : top + cell, right - cell : right] = 235 if index >> bit & 1 else 16


def read_index(frame: np.ndarray) -> int:
    """The index `stamp_index` drew, read from the middle of each cell (robust to lossy codecs)."""
    height, width = frame.shape[:2]
    cell = index_cell(height)
    top, inset = height - cell - 4, cell // 4
    index = 0
    for bit in range(INDEX_BITS):
        right = width - 4 - bit * cell
        middle = frame[top + inset : top + cell - inset, right - cell + inset : right - inset]
        index |= int(middle.mean() > 128) << bit
    return index


def paste(canvas: np.ndarray, who: Guest, x: int, y: int) -> Box:
    height, width = who.pixels.shape[:2]
    canvas[y : y + height, x : x + width] = who.pixels
    x1, y1, x2, y2 = who.box
    return (x + x1, y + y1, x + x2, y + y2)


@dataclass(frozen=True)
class Walk:
    """The DNP guest's part: in frame `enter`, out from `leave`, back from `back` to the end;
    walking right (`step` pixels a frame) from the left edge in the first stretch, left from the
    right edge (sinking DNP_DRIFT pixels) in the second."""

    enter: int
    leave: int
    back: int
    step: int


def dnp_positions(walk: Walk, count: int, width: int, crop_width: int) -> list[tuple[int, int] | None]:
    """Where the DNP crop's top-left corner is in each frame, None while they are away."""
    assert 0 < walk.enter < walk.leave < walk.back < count, "absent in frame 0 and in between"
    left, right = 20, width - crop_width - 20
    assert left + walk.step * (walk.leave - walk.enter - 1) <= right, "the first stretch walks off the frame"
    assert right - walk.step * (count - walk.back - 1) >= left, "the second stretch walks off the frame"
    positions: list[tuple[int, int] | None] = []
    for i in range(count):
        if walk.enter <= i < walk.leave:
            positions.append((left + walk.step * (i - walk.enter), DNP_TOP))
        elif i >= walk.back:
            sink = round(DNP_DRIFT * (i - walk.back) / max(1, count - walk.back - 1))
            positions.append((right - walk.step * (i - walk.back), DNP_TOP + sink))
        else:
            positions.append(None)
    return positions


def scripted_frames(
    group: np.ndarray, group_faces, walk: Walk, *, width: int, height: int, scale: float, count: int
) -> tuple[list[np.ndarray], list[ScriptedFrame]]:
    """`count` BGR frames of width x height and their script (see the module docstring)."""
    dnp = guest(group, group_faces[0].box, scale)
    others = [guest(group, group_faces[i].box, scale) for i in OTHER_GUESTS]
    base = background(width, height)
    # The others stand along the bottom, spaced evenly left of the index stamp.
    stamp_width = INDEX_BITS * index_cell(height) + 8
    gap = (width - stamp_width - sum(o.pixels.shape[1] for o in others)) // (len(others) + 1)
    assert gap > 0, "the others do not fit side by side"
    x, placed = gap, []
    for other in others:
        placed.append((other, x, height - other.pixels.shape[0] - 2))
        x += other.pixels.shape[1] + gap
    lowest_dnp = DNP_TOP + DNP_DRIFT + dnp.pixels.shape[0]
    assert lowest_dnp <= min(y for _, _, y in placed), "the DNP guest's band overlaps the others'"
    frames, script = [], []
    for i, where in enumerate(dnp_positions(walk, count, width, dnp.pixels.shape[1])):
        canvas = base.copy()
        other_boxes = tuple(paste(canvas, other, ox, oy) for other, ox, oy in placed)
        dnp_box = paste(canvas, dnp, *where) if where is not None else None
        stamp_index(canvas, i)
        frames.append(canvas)
        script.append(ScriptedFrame(dnp_box, other_boxes))
    return frames, script


# Not all equal: a worker that rewrites every frame at one duration fails the timing check.
ANIMATION_DURATIONS_MS = (80, 120, 100, 140)
ANIMATION_FRAMES = 14
# In frames 2-5 and 8-13, 80 px (1.1 face widths) a frame: an animation is a few stills a second.
ANIMATION_WALK = Walk(enter=2, leave=6, back=8, step=80)
VIDEO_FPS, VIDEO_FRAMES = 30, 75
# In frames 7-33 and 43-74 at 12 px a frame (0.11 face widths; 360 px/s, across the 1280 px frame
# in 3.5 s: a brisk walk). Frames 7 and 43 are each 5 frames before the next frame of a 0.2 s
# detection cadence (0, 6, 12, ...): the worst place for a face to come in.
VIDEO_WALK = Walk(enter=7, leave=34, back=43, step=12)


def _animation(group, group_faces, fmt: str, loop: int, **save) -> Clip:
    count = ANIMATION_FRAMES
    frames, script = scripted_frames(group, group_faces, ANIMATION_WALK, width=640, height=360, scale=0.65, count=count)
    durations = [ANIMATION_DURATIONS_MS[i % len(ANIMATION_DURATIONS_MS)] for i in range(count)]
    images = [Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)) for frame in frames]
    out = io.BytesIO()
    images[0].save(out, fmt, save_all=True, append_images=images[1:], duration=durations, loop=loop, **save)
    return Clip(out.getvalue(), script, (640, 360), durations, loop)


def animated_webp(group, group_faces) -> Clip:
    """640x360 animated WebP (lossy, quality 90), 14 frames, looping forever."""
    return _animation(group, group_faces, "WEBP", 0, quality=90, method=4)


def animated_gif(group, group_faces) -> Clip:
    """640x360 GIF (one adaptive palette per frame), 14 frames, played twice (loop=2)."""
    return _animation(group, group_faces, "GIF", 2)


# A run: 45 px a frame (0.4 face widths; 12 face widths a second, across the frame in under a
# second), so the face moves 2.4 face widths between two looks and enters and leaves between them.
RUNNING_WALK = Walk(enter=7, leave=28, back=55, step=45)


def mp4(group, group_faces, *, tone_hz: float = 440.0, walk: Walk = VIDEO_WALK) -> Clip:
    """1280x720 H.264 (libx264, yuv420p), 75 frames at 30 fps (2.5 s), with an AAC mono sine tone
    as long as the picture.

    The moov box is left at the end (no faststart): a faststart output is then the worker's doing.
    """
    fps, count = VIDEO_FPS, VIDEO_FRAMES
    frames, script = scripted_frames(group, group_faces, walk, width=1280, height=720, scale=1.0, count=count)
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = 1280, 720, "yuv420p"
        video.options = {"crf": "18", "preset": "veryfast"}
        audio = container.add_stream("aac", rate=48000, layout="mono")
        for i, pixels in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        samples = round(count / fps * 48000)
        tone = (0.3 * np.sin(2 * np.pi * tone_hz * np.arange(samples) / 48000)).astype(np.float32)
        for start in range(0, samples, 1024):
            chunk = av.AudioFrame.from_ndarray(tone[None, start : start + 1024], format="fltp", layout="mono")
            chunk.sample_rate, chunk.pts, chunk.time_base = 48000, start, Fraction(1, 48000)
            container.mux(audio.encode(chunk))
        container.mux(audio.encode(None))
    return Clip(out.getvalue(), script, (1280, 720), [round(1000 / fps)] * count, None, fps)


def heic(image: np.ndarray, quality: int = 90) -> bytes:
    """A HEIC still (pillow_heif) of BGR `image`."""
    import pillow_heif

    pillow_heif.register_heif_opener()
    out = io.BytesIO()
    Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)).save(out, "HEIF", quality=quality)
    return out.getvalue()


@dataclass(frozen=True)
class DecodedAnimation:
    frames: list[np.ndarray]  # BGR
    durations_ms: list[int]
    loop: int | None
    format: str


def read_animation(data: bytes) -> DecodedAnimation:
    """Every frame of an animated WebP / GIF / APNG as Pillow composes it, in BGR, with its duration."""
    frames, durations = [], []
    with Image.open(io.BytesIO(data)) as image:
        for i in range(getattr(image, "n_frames", 1)):
            image.seek(i)
            frames.append(cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR))
            durations.append(int(image.info.get("duration", 0)))
        return DecodedAnimation(frames, durations, image.info.get("loop"), image.format)


@dataclass(frozen=True)
class DecodedVideo:
    frames: list[np.ndarray]  # BGR
    times: list[float]  # each frame's presentation time, seconds
    codec: str
    pix_fmt: str
    size: tuple[int, int]
    audio_codec: str | None
    audio_seconds: float | None


def read_video(data: bytes) -> DecodedVideo:
    """Every frame of the first video stream (PyAV), and what its first audio stream holds."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        frames, times = [], []
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="bgr24"))
            times.append(float(frame.time))
        codec, pix_fmt = stream.codec_context.name, stream.codec_context.pix_fmt
        size = (stream.codec_context.width, stream.codec_context.height)
    audio_codec = audio_seconds = None
    with av.open(io.BytesIO(data)) as container:
        if container.streams.audio:
            audio = container.streams.audio[0]
            audio_codec = audio.codec_context.name
            samples = rate = 0
            for frame in container.decode(audio):
                samples += frame.samples
                rate = frame.sample_rate
            audio_seconds = samples / rate if rate else 0.0
    return DecodedVideo(frames, times, codec, pix_fmt, size, audio_codec, audio_seconds)


def box_order(data: bytes) -> list[bytes]:
    """The top-level ISO-BMFF boxes of an MP4, in file order (b'ftyp', b'moov', b'mdat', ...)."""
    kinds, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset : offset + 4], "big")
        kind = data[offset + 4 : offset + 8]
        if size == 1:
            size = int.from_bytes(data[offset + 8 : offset + 16], "big")
        elif size == 0:
            size = len(data) - offset
        if size < 8:
            break
        kinds.append(kind)
        offset += size
    return kinds
