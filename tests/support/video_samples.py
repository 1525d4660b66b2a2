"""Videos as phones and attackers make them, from t1's real faces, each with its script: where the DNP guest's
face is in every frame. Written with PyAV (FFmpeg's libx264, libvpx, AAC, AC-3)."""

import io
from dataclasses import dataclass
from fractions import Fraction

import av
import cv2
import numpy as np

from tests.support.media_clips import Box, background, guest, paste

# The schedule of looks at 30 fps: frames 0, 6, 12, ... (faces.tracks.Tracking.look_interval_s, 0.2 s).
LOOK_EVERY = {30: 6, 60: 12}


@dataclass(frozen=True)
class Video:
    data: bytes
    dnp: list[Box | None]  # the DNP guest's face box in each frame (None: not in it)
    others: list[tuple[Box, ...]]  # the other guests' face boxes in each frame
    times: list[float]


def encode(
    frames: list[np.ndarray], times: list[float], *, fmt: str = "mp4", codec: str = "libx264", options=None,
    audio: str | None = None, audio_payload: bytes | None = None, rate: int = 30, base=Fraction(1, 90000),
    codec_options: dict | None = None,
) -> bytes:  # fmt: skip
    """The frames at their times (by default in a 1/90000 time base, as phones write: any rate, gaps),
    optionally with a second of sound (`audio`: an encoder, "aac" or "ac3"); `audio_payload` is muxed as one
    more audio packet, as it is. `codec_options` go to the video encoder (x264's `crf`, `preset`)."""
    out = io.BytesIO()
    height, width = frames[0].shape[:2]
    with av.open(out, "w", format=fmt, options=options or {}) as container:
        video = container.add_stream(codec, rate=rate)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        video.time_base = video.codec_context.time_base = base
        video.options = codec_options or {}
        sound = container.add_stream(audio, rate=48000, layout="stereo") if audio else None
        for pixels, time in zip(frames, times, strict=True):
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts, frame.time_base = round(time / base), base
            container.mux(video.encode(frame))
        container.mux(video.encode(None))
        if sound is not None:
            _tone(container, sound, seconds=max(1.0, times[-1]))
            if audio_payload is not None:
                packet = av.Packet(audio_payload)
                packet.stream, packet.pts, packet.dts = sound, 48000, 48000
                packet.time_base = Fraction(1, 48000)
                container.mux(packet)
    return out.getvalue()


def _tone(container, stream, seconds: float) -> None:
    size = stream.codec_context.frame_size or 1024
    samples = round(seconds * 48000)
    wave = (0.2 * np.sin(2 * np.pi * 440 * np.arange(samples) / 48000)).astype(np.float32)
    for start in range(0, samples - size + 1, size):
        chunk = np.repeat(wave[None, start : start + size], 2, axis=0)
        frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
        frame.sample_rate, frame.pts, frame.time_base = 48000, start, Fraction(1, 48000)
        container.mux(stream.encode(frame))
    container.mux(stream.encode(None))


def scene(group, group_faces, *, width: int, height: int, scale: float, dnp_at, count: int, fps: int = 30,
          dnp_pixels=None, standing: tuple[int, ...] = (3,), shade=None) -> Video:  # fmt: skip
    """`count` frames at `fps`: guests `standing` along the bottom, still; the DNP guest (t1's leftmost,
    `scale`d) at `dnp_at(i)` (top-left corner, or None) in frame i, its pixels `dnp_pixels(i, crop)` if given."""
    dnp = guest(group, group_faces[0].box, scale)
    base = background(width, height) if shade is None else np.full((height, width, 3), shade, np.uint8)
    others, x = [], 20
    for index in standing:
        other = guest(group, group_faces[index].box, scale)
        others.append((other, x, height - other.pixels.shape[0] - 4))
        x += other.pixels.shape[1] + 40
    frames, dnp_boxes, other_boxes = [], [], []
    for i in range(count):
        canvas = base.copy()
        other_boxes.append(tuple(paste(canvas, other, ox, oy) for other, ox, oy in others))
        where = dnp_at(i)
        if where is None:
            dnp_boxes.append(None)
        else:
            shown = dnp if dnp_pixels is None else dnp_pixels(i, dnp)
            dnp_boxes.append(paste(canvas, shown, *where))
        frames.append(canvas)
    times = [i / fps for i in range(count)]
    return Video(encode(frames, times, rate=fps, base=Fraction(1, fps)), dnp_boxes, other_boxes, times)


def motion_blurred(who, length: int = 31):
    """The guest's crop smeared along a horizontal line, as a fast pan or a run leaves it."""
    kernel = np.zeros((length, length), np.float32)
    kernel[length // 2, :] = 1.0 / length
    return type(who)(cv2.filter2D(who.pixels, -1, kernel), who.box)


def occluded(who):
    """The guest's crop under a grey card."""
    return type(who)(np.full_like(who.pixels, 96), who.box)


def resizing_webm(frames_by_size: list[list[np.ndarray]], fps: int = 30) -> bytes:
    """A WebM (VP8) whose resolution changes mid-stream, as MediaRecorder writes one: each list of frames
    encoded at its own size, the packets muxed into the one stream."""
    out = io.BytesIO()
    with av.open(out, "w", format="webm") as container:
        height, width = frames_by_size[0][0].shape[:2]
        stream = container.add_stream("libvpx", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        index = 0
        for part, frames in enumerate(frames_by_size):
            encoder = stream.codec_context if part == 0 else _vp8(frames[0], fps)
            for pixels in frames:
                frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
                frame.pts, frame.time_base = index, Fraction(1, fps)
                _mux(container, stream, encoder.encode(frame), fps)
                index += 1
            _mux(container, stream, encoder.encode(None), fps)
    return out.getvalue()


def _vp8(first: np.ndarray, fps: int):
    encoder = av.CodecContext.create("libvpx", "w")
    encoder.height, encoder.width = first.shape[:2]
    encoder.pix_fmt, encoder.time_base, encoder.framerate = "yuv420p", Fraction(1, fps), fps
    return encoder


def _mux(container, stream, packets, fps: int) -> None:
    for packet in packets:
        packet.time_base = Fraction(1, fps)  # each encoder's own: frame numbers
        packet.stream = stream
        container.mux(packet)
