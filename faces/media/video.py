"""Videos (MP4, MOV, WebM, MPEG-TS, any container FFmpeg reads) in; MP4 out: H.264, yuv420p,
faststart, the sound decoded and encoded again as AAC.

PyAV (FFmpeg's libraries, in-process) decodes and encodes: frames come as numpy arrays with
their timestamps, and the output keeps the upload's timestamps frame for frame, in the
upload's own time base (a variable frame rate and gaps included); timestamps that repeat or
go backwards are moved one frame past the one before. A frame of another size than the first
(a recording whose resolution changes) is scaled to the first frame's size. Audio is decoded
and encoded again, never copied packet for packet: a packet can carry any bytes, a picture
included; one that does not decode is dropped. Nothing is ever held whole: opening reads the
packets' timestamps and decodes the first frame in one pass, the detection pass and the render
pass each stream the file once, and every output of the render pass is encoded from the same
decoded frame.
"""

import io
import os
import tempfile
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from faces.checkpoint import Checkpoint, never_stop
from faces.geometry import bounds
from faces.media.clip import Clip
from faces.media.upload import MediaKind, MediaLimits, Painter, RenderedFile, Stroke, UndecodableMedia, poster

# The display matrix's counter-clockwise turn -> the turn that makes a frame upright.
TURN = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_CLOCKWISE}


class Video(Clip):
    kind = MediaKind.VIDEO
    extension = "mp4"
    every_frame = False

    def __init__(self, data: bytes, limits: MediaLimits | None = None):
        super().__init__(data, limits)
        first, stamps, time_base, self._rate = self._header()
        self._first_pts, self._time_base = stamps[0], time_base
        self._frame_s = float(1 / self._rate)
        self.frame_count = len(stamps)
        self.duration_ms = round((self._seconds(stamps[-1]) + self._frame_s) * 1000)
        # Phones record the sensor's way up and say how to turn it (the display matrix). The frames
        # are turned upright before anything looks at them (a face on its side is not detected),
        # and the outputs are written upright, with no matrix.
        self._rotation = first.rotation % 360
        # Every frame is shown at the first frame's size (a resolution change mid-stream is scaled to it).
        self._size = (first.width, first.height)
        width, height = self._size
        self.limits.check_clip(frames=self.frame_count, duration_s=self.duration_ms / 1000, width=width, height=height)
        self.width, self.height = (height, width) if self._rotation in (90, 270) else (width, height)
        # Frames with nothing to blur skip the BGR round trip, unless they need padding; and the encoder's own copy
        # too, unless they need turning.
        self._even = width % 2 == 0 and height % 2 == 0
        self._as_decoded = self._rotation == 0 and self._even

    def _header(self) -> tuple[av.VideoFrame, list[int], Fraction, Fraction]:
        """One read of the stream: its first frame (decoded only once the header's frame size is within the
        limit), every packet's timestamp (from the packets alone: no other frame is decoded), its time base and
        its frame rate."""
        with self._open() as container:
            stream = container.streams.video[0]
            self.limits.check_frame(stream.codec_context.width, stream.codec_context.height)
            rate = stream.average_rate or stream.guessed_rate or Fraction(30)
            first, stamps = None, []
            for packet in _demuxed(container, stream):
                if packet.pts is not None:
                    stamps.append(packet.pts)
                if first is None:
                    first = next(iter(_decoded(packet)), None)
            if not stamps:
                raise UndecodableMedia("a video stream without a single timestamped frame")
            if first is None:
                raise UndecodableMedia("the video stream decoded to no frame")
            return first, sorted(stamps), stream.time_base, rate

    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        for frame, time in self._timed(self._decoded_frames()):
            yield time, self._upright(frame)

    def _decoded_frames(self) -> Iterator[av.VideoFrame]:
        with self._open() as container:
            for packet in _demuxed(container, _decoding_ahead(container.streams.video[0])):
                yield from _decoded(packet)

    def _timed(self, frames) -> Iterator[tuple[av.VideoFrame, float]]:
        """Each frame with its time, strictly increasing: a frame without a timestamp, or whose timestamp
        repeats or goes backwards, comes one frame after the one before."""
        time = -self._frame_s
        for frame in frames:
            stamped = self._seconds(frame.pts) if frame.pts is not None else None
            time = stamped if stamped is not None and stamped > time + 1e-9 else time + self._frame_s
            yield frame, time
        if time >= 0:
            # A whole pass: the clip lasts until one frame past its last frame, on the clock its frames' times
            # (the faces' frame_time, the output's timestamps) come from; until then, the packets' estimate.
            self.duration_ms = round((time + self._frame_s) * 1000)

    def _upright(self, frame: av.VideoFrame) -> np.ndarray:
        self.limits.check_frame(frame.width, frame.height)
        pixels = frame.to_ndarray(format="bgr24")
        if (frame.width, frame.height) != self._size:
            pixels = cv2.resize(pixels, self._size, interpolation=cv2.INTER_AREA)
        return cv2.rotate(pixels, TURN[self._rotation]) if self._rotation in TURN else pixels

    def _as_it_is(self, frame: av.VideoFrame) -> bool:
        """Whether a frame no output blurs can go to the encoders as decoded: upright, even-sided, full size."""
        return self._as_decoded and self._full_size(frame)

    def render(self, painters: list[Painter], checkpoint: Checkpoint = never_stop) -> list[RenderedFile]:
        at_once = max(1, self.limits.encoded_pixels_at_once // (self.width * self.height))
        with tempfile.TemporaryDirectory(prefix="momentlens-video-") as folder:
            paths = [Path(folder) / f"out{index}.mp4" for index in range(len(painters))]
            posters = []
            for first in range(0, len(painters), at_once):
                chunk = slice(first, first + at_once)
                posters += self._encode(painters[chunk], paths[chunk], checkpoint)
            checkpoint()  # the last frame's came before the encoders' ends: once more before any upload
            return [RenderedFile(path.read_bytes(), poster) for path, poster in zip(paths, posters, strict=True)]

    def _encode(self, painters: list[Painter], paths: list[Path], checkpoint: Checkpoint) -> list[bytes]:
        """Every frame decoded once and written to each output, the outputs side by side, each on a thread of its own
        (`_Output.later`): an encoder waits on its own threads for most of a frame, so one thread feeding each encoder
        in turn left the cores idle, and a frame whose writes all had to end before the next was read left them
        idle between frames (a 1080p clip's three MP4s: docs/MEASUREMENTS.md, "Encoders side by side"). Each
        output's container is only ever used by its own thread, its frames and sound in the file's order."""
        with self._open() as source:
            video_in = _decoding_ahead(source.streams.video[0])
            audio_in = source.streams.audio[0] if source.streams.audio else None
            options = side_by_side(self.limits.x264_options, len(paths))
            outputs = [
                _Output(path, self.width, self.height, video_in, audio_in, self._rate, options) for path in paths
            ]
            try:
                frames = _video_and_audio(source, video_in, audio_in, lambda packet: _audio_to_all(packet, outputs))
                for frame, time in self._timed(frames):
                    checkpoint()
                    self._writes(outputs, painters, frame, time)
                for output in outputs:
                    output.drain()  # an output's error is raised here, or at a `later` that waited on it
            finally:
                for output in outputs:
                    output.close()
        if any(output.poster is None for output in outputs):
            raise UndecodableMedia("the video stream decoded to no frame")
        return [output.poster for output in outputs]

    def _writes(self, outputs: list["_Output"], painters: list[Painter], frame, time: float) -> None:
        """Each output's write of one frame, on its own thread, the way `_way` gives. The frame's BGR pixels and its
        planes turned upright are made once, if a way needs them; every output of it carries the same timestamp, set
        here before any of them reads it."""
        frame.pts, frame.time_base = self._pts(frame, time), self._time_base
        ways = [self._way(output, painter, frame, time) for output, painter in zip(outputs, painters, strict=True)]
        pixels = self._upright(frame) if {"whole", "patched"} & set(ways) else None
        planes = self._upright_planes(frame) if {"patched", "planes"} & set(ways) else None
        for output, painter, way in zip(outputs, painters, ways, strict=True):
            if way == "decoded":
                output.later(output.decoded, frame)
            elif way == "whole":
                output.later(self._write_whole, output, painter, frame, pixels, time)
            else:
                output.later(self._write_patched, output, painter, frame, pixels, planes, time, way == "patched")
            output.started = True

    def _way(self, output: "_Output", painter: Painter, frame: av.VideoFrame, time: float) -> str:
        """How one output gets a frame: "decoded", as it is, when it paints nothing there and the frame needs no
        turning; "planes", its decoded planes turned upright, when it paints nothing there; "patched", those planes
        with its painted patches over them (`painted_patches`); "whole", painted whole in BGR and converted whole.
        The planes serve a yuv420p frame, even-sided, at the clip's size; an output's first frame is painted whole
        (its poster)."""
        paints = _paints_at(painter, time)
        if not output.started:
            return "whole"
        if not paints and self._as_it_is(frame):
            return "decoded"
        if self._even and frame.format.name == "yuv420p" and self._full_size(frame):
            return "patched" if paints else "planes"
        return "whole"

    def _full_size(self, frame: av.VideoFrame) -> bool:
        return (frame.width, frame.height) == self._size

    def _write_whole(
        self, output: "_Output", painter: Painter, frame: av.VideoFrame, pixels: np.ndarray, time: float
    ) -> None:
        """One output's frame painted whole and encoded, and its poster when it is the output's first frame."""
        painted = pixels.copy()
        painter(time, painted)
        output.video(painted, frame.pts, self._time_base)
        if output.poster is None:
            output.poster = poster(painted, self.limits)

    def _write_patched(
        self,
        output: "_Output",
        painter: Painter,
        frame: av.VideoFrame,
        pixels: np.ndarray | None,
        planes: list[np.ndarray],
        time: float,
        paints: bool,
    ) -> None:
        """One output's frame as its upright planes with its painted patches over them (none where it paints
        nothing)."""
        patches = painted_patches(pixels, painter.strokes(time)) if paints else []
        output.patched(planes, patches, frame.pts, self._time_base)

    def _upright_planes(self, frame: av.VideoFrame) -> list[np.ndarray]:
        """A yuv420p frame's Y, U and V planes turned upright (each sample kept: a 2x2 block stays one)."""
        planes = _planes(frame)
        return [cv2.rotate(plane, TURN[self._rotation]) for plane in planes] if self._rotation in TURN else planes

    def _open(self):
        try:
            container = av.open(io.BytesIO(self.data), mode="r")
        except av.FFmpegError as error:
            raise UndecodableMedia(f"not a video FFmpeg can read: {error}") from None
        if not container.streams.video:
            container.close()
            raise UndecodableMedia("a container without a video stream")
        return container

    def _pts(self, frame: av.VideoFrame, time: float) -> int:
        """The output timestamp: the frame's own, moved where _timed moved it."""
        return self._first_pts + round(time / self._time_base)

    def _seconds(self, pts: int) -> float:
        return float((pts - self._first_pts) * self._time_base)


def side_by_side(x264_options: Mapping[str, str], outputs: int) -> Mapping[str, str]:
    """The options of one of `outputs` encoders that run side by side: the cores split between them, since left to its
    own count each x264 starts threads for every core (docs/MEASUREMENTS.md, "Encoders side by side"). One output
    keeps x264's own count."""
    if outputs < 2 or "threads" in x264_options:
        return x264_options
    return {**x264_options, "threads": str(max(1, (os.cpu_count() or 1) // outputs))}


def _decoding_ahead(stream):
    """The stream decoded by FFmpeg's own threads, frames ahead of the one taken: its decoding runs beside the
    detector and the painters instead of between them (a 1080p clip's 0.4-0.9 s a pass, bench/media.py)."""
    stream.thread_type = "AUTO"
    return stream


def _paints_at(painter: Painter, time: float) -> bool:
    return any(start <= time <= end for start, end in painter.spans)


def painted_patches(pixels: np.ndarray, strokes: list[Stroke]) -> list[tuple[int, int, np.ndarray]]:
    """The frame's painted areas as (x, y, yuv420p pixels) patches: strokes whose reaches overlap are painted
    together, in their order, on a copy of the pixels they reach, each patch widened to even pixels (yuv420p keeps
    one colour sample per 2x2) and converted alone. The rest of the frame is left as decoded: a patch's pixels are
    those the whole frame painted and converted gives there, and the copy and conversion of the whole frame for
    every output are not made (docs/MEASUREMENTS.md, "Clips: the render in patches and frames read ahead")."""
    height, width = pixels.shape[:2]
    patches = []
    for (x1, y1, x2, y2), group in _overlapping(strokes, width, height):
        patch = pixels[y1:y2, x1:x2].copy()
        for stroke in group:
            stroke.paint(patch, (x1, y1))
        patches.append((x1, y1, cv2.cvtColor(patch, cv2.COLOR_BGR2YUV_I420)))
    return patches


def _overlapping(strokes: list[Stroke], width: int, height: int) -> list[tuple[tuple[int, int, int, int], list]]:
    """The strokes that reach into the frame, in groups whose even-widened reaches overlap, each with its group's
    bounds; a group's strokes in their order."""
    groups: list[tuple[tuple[int, int, int, int], list[int]]] = []
    for index, stroke in enumerate(strokes):
        x1, y1, x2, y2 = stroke.reach(width, height)
        if x2 <= x1 or y2 <= y1:
            continue
        box, members = (x1 // 2 * 2, y1 // 2 * 2, min(width, -(-x2 // 2) * 2), min(height, -(-y2 // 2) * 2)), [index]
        while touching := [group for group in groups if _overlap(group[0], box)]:
            for group in touching:
                groups.remove(group)
                box, members = bounds(box, group[0]), members + group[1]
        groups.append((box, members))
    return [(box, [strokes[index] for index in sorted(members)]) for box, members in groups]


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def put_patches(planes: list[np.ndarray], patches: list[tuple[int, int, np.ndarray]]) -> None:
    """Each (x, y, yuv420p pixels) patch written into a frame's Y, U and V planes (x and y even)."""
    for x, y, yuv in patches:
        height, width = yuv.shape[0] * 2 // 3, yuv.shape[1]
        chroma = yuv.reshape(-1)[height * width :].reshape(2, height // 2, width // 2)
        planes[0][y : y + height, x : x + width] = yuv[:height]
        for plane, samples in zip(planes[1:], chroma, strict=True):
            plane[y // 2 : (y + height) // 2, x // 2 : (x + width) // 2] = samples


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    """A yuv420p frame's three planes as arrays over its own buffers (rows past the width cut off)."""
    return [
        np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, : plane.width]
        for plane in frame.planes
    ]


def _audio_to_all(packet: av.Packet, outputs: list["_Output"]) -> None:
    """The packet's sound, decoded once, into every output; a packet that does not decode is dropped."""
    if packet.dts is None:  # the demuxer's end-of-stream marker
        return
    try:
        frames = packet.decode()
    except av.FFmpegError:
        return
    for output in outputs:
        output.later(output.encode_audio, frames)


def _video_and_audio(container, video_in, audio_in, on_audio) -> Iterator[av.VideoFrame]:
    """The video stream's frames; the audio stream's packets, in the file's order, go to `on_audio`."""
    for packet in _demuxed(container, *[s for s in (video_in, audio_in) if s is not None]):
        if packet.stream is audio_in:
            on_audio(packet)
        else:
            yield from _decoded(packet)


def _demuxed(container, *streams) -> Iterator[av.Packet]:
    """The container's packets; a file that breaks off or lies is undecodable media, never retried."""
    try:
        yield from container.demux(*streams)
    except av.FFmpegError as error:
        raise UndecodableMedia(f"the video breaks off: {error}") from None


def _decoded(packet: av.Packet) -> list:
    try:
        return packet.decode()
    except av.FFmpegError as error:
        raise UndecodableMedia(f"a frame does not decode: {error}") from None


class _Output:
    """One MP4 being written: H.264 frames with the upload's timestamps, its sound encoded again as AAC. Its writes
    run in order on a thread of its own, at most `ahead` frames behind the frame being read (each holds a frame)."""

    ahead = 3

    def __init__(self, path: Path, width: int, height: int, video_in, audio_in, rate: Fraction, x264_options: Mapping):
        self._lane = ThreadPoolExecutor(1, thread_name_prefix="encode")
        self._queued: deque[Future] = deque()
        self.started, self.poster = False, None
        self.container = av.open(str(path), mode="w", format="mp4", options={"movflags": "+faststart"})
        self.stream = self.container.add_stream("libx264", rate=rate, options=dict(x264_options))
        # yuv420p needs even sides: an odd one gets one copied row or column at its far edge.
        self.stream.width, self.stream.height = width + width % 2, height + height % 2
        self.stream.pix_fmt = "yuv420p"
        # The encoder counts in the upload's own time base: in 1/rate (its default) a variable frame rate
        # or a gap rounds two frames onto one tick, and the muxer refuses the file ("Invalid argument").
        self.stream.time_base = self.stream.codec_context.time_base = video_in.time_base
        self.audio_out, self.resampler = None, None
        if audio_in is not None:
            rate = audio_in.codec_context.sample_rate or 48000
            layout = audio_in.codec_context.layout.name if audio_in.codec_context.channels <= 2 else "stereo"
            self.audio_out = self.container.add_stream("aac", rate=rate, layout=layout)
            self.resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)

    def video(self, painted: np.ndarray, pts: int, time_base: Fraction) -> None:
        if painted.shape[1] != self.stream.width or painted.shape[0] != self.stream.height:
            painted = np.pad(
                painted,
                ((0, self.stream.height - painted.shape[0]), (0, self.stream.width - painted.shape[1]), (0, 0)),
                mode="edge",
            )
        # The encoder's own format, converted by OpenCV (BT.601, as FFmpeg's swscale would from bgr24, and in less
        # of the encoding thread's time than swscale inside the encoder).
        frame = av.VideoFrame.from_ndarray(cv2.cvtColor(painted, cv2.COLOR_BGR2YUV_I420), format="yuv420p")
        frame.pts, frame.time_base = pts, time_base
        self.container.mux(self.stream.encode(frame))

    def patched(
        self, planes: list[np.ndarray], patches: list[tuple[int, int, np.ndarray]], pts: int, time_base: Fraction
    ) -> None:
        """A frame from its yuv420p planes (upright, the output's size), the painted patches written over a copy."""
        height, width = planes[0].shape
        out = av.VideoFrame(width, height, "yuv420p")
        copies = _planes(out)
        for source, target in zip(planes, copies, strict=True):
            np.copyto(target, source)
        put_patches(copies, patches)
        out.pts, out.time_base = pts, time_base
        self.container.mux(self.stream.encode(out))

    def decoded(self, frame: av.VideoFrame) -> None:
        """A decoded frame as it is, its timestamp already the output's (the encoder converts its pixel format if it
        must). Other outputs encode the same frame at the same time: in the encoder's own time base (every output's
        is the upload's) PyAV leaves the frame untouched."""
        self.container.mux(self.stream.encode(frame))

    def encode_audio(self, frames: list) -> None:
        for frame in frames:
            for resampled in self.resampler.resample(frame):
                self.container.mux(self.audio_out.encode(resampled))

    def later(self, write, *args) -> None:
        """`write(*args)` on the output's thread, after every write given before it."""
        self._queued.append(self._lane.submit(write, *args))
        while len(self._queued) > self.ahead:
            self._queued.popleft().result()

    def drain(self) -> None:
        while self._queued:
            self._queued.popleft().result()

    def close(self) -> None:
        """The encoder's last frames and the file's end written, once its thread has stopped (a write not yet
        started is dropped: the render failed or was stopped)."""
        self._lane.shutdown(wait=True, cancel_futures=True)
        try:
            self.container.mux(self.stream.encode(None))
            if self.audio_out is not None:
                self.container.mux(self.audio_out.encode(None))
        finally:
            self.container.close()
