"""Videos (MP4, MOV, WebM) in; MP4 out: H.264, yuv420p, faststart, the audio kept as it is.

PyAV (FFmpeg's libraries, in-process) decodes and encodes: frames come as numpy arrays with
their timestamps, the output keeps the upload's timestamps frame for frame, and the audio
packets are copied into every output without being decoded. Nothing is ever held whole:
the detection pass and the render pass each stream the file once, and every output of the
render pass is encoded from the same decoded frame.
"""

import io
import tempfile
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from faces.images import MediaKind
from faces.media import limits
from faces.media.clip import Clip, Painter, RenderedFile, poster

# x264: "veryfast" is the speed the 4x-real-time goal allows on two cores (bench/media.py);
# CRF 20 keeps faces that are not blurred as sharp as the phone's upload looks.
X264_OPTIONS = {"preset": "veryfast", "crf": "20"}
# Audio the MP4 muxer takes as it is; any other (Vorbis, PCM) is re-encoded to AAC.
MP4_AUDIO = {"aac", "mp3", "opus", "alac", "flac", "ac3", "eac3"}


class Video(Clip):
    kind = MediaKind.VIDEO
    extension = "mp4"
    every_frame = False

    def __init__(self, data: bytes):
        self._data = data
        with self._open() as container:
            stream = container.streams.video[0]
            self.width, self.height = stream.codec_context.width, stream.codec_context.height
            self._rate = stream.average_rate or stream.guessed_rate or Fraction(30)
            # Timestamps come from the packets alone: no frame is decoded before the limits are checked.
            stamps = sorted(packet.pts for packet in container.demux(stream) if packet.pts is not None)
            time_base = stream.time_base
        if not stamps:
            raise limits.UndecodableMedia("a video stream without a single timestamped frame")
        self._first_pts, self._time_base = stamps[0], time_base
        self.frame_times = [self._seconds(pts) for pts in stamps]
        frame_s = float(1 / self._rate)
        self.duration_ms = round((self.frame_times[-1] + frame_s) * 1000)
        limits.check(frames=len(stamps), duration_s=self.duration_ms / 1000, width=self.width, height=self.height)

    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        with self._open() as container:
            for frame in container.decode(video=0):
                yield self._time(frame), frame.to_ndarray(format="bgr24")

    def render(self, painters: list[Painter]) -> list[RenderedFile]:
        with tempfile.TemporaryDirectory(prefix="momentlens-video-") as folder:
            paths = [Path(folder) / f"out{index}.mp4" for index in range(len(painters))]
            posters = self._encode(painters, paths)
            return [RenderedFile(path.read_bytes(), poster) for path, poster in zip(paths, posters, strict=True)]

    def _encode(self, painters: list[Painter], paths: list[Path]) -> list[bytes]:
        with self._open() as source:
            video_in = source.streams.video[0]
            audio_in = source.streams.audio[0] if source.streams.audio else None
            outputs = [_Output(path, video_in, audio_in, self._rate) for path in paths]
            posters: list[bytes | None] = [None] * len(outputs)
            try:
                for packet in source.demux(*[s for s in (video_in, audio_in) if s is not None]):
                    if packet.stream is audio_in:
                        _audio_to_all(packet, outputs)
                        continue
                    for frame in packet.decode():
                        time, pixels = self._time(frame), frame.to_ndarray(format="bgr24")
                        for index, (output, painter) in enumerate(zip(outputs, painters, strict=True)):
                            painted = pixels.copy()
                            painter(time, painted)
                            posters[index] = posters[index] or poster(painted)
                            output.video(painted, frame)
            finally:
                for output in outputs:
                    output.close()
        if any(p is None for p in posters):
            raise limits.UndecodableMedia("the video stream decoded to no frame")
        return posters

    def _open(self):
        try:
            container = av.open(io.BytesIO(self._data), mode="r")
        except av.FFmpegError as error:
            raise limits.UndecodableMedia(f"not a video FFmpeg can read: {error}") from None
        if not container.streams.video:
            container.close()
            raise limits.UndecodableMedia("a container without a video stream")
        return container

    def _time(self, frame: av.VideoFrame) -> float:
        return self._seconds(frame.pts) if frame.pts is not None else 0.0

    def _seconds(self, pts: int) -> float:
        return float((pts - self._first_pts) * self._time_base)


def _audio_to_all(packet: av.Packet, outputs: list["_Output"]) -> None:
    if packet.dts is None:  # the demuxer's end-of-stream marker
        return
    if outputs and outputs[0].resampler is not None:
        frames = packet.decode()  # once, for every output
        for output in outputs:
            output.encode_audio(frames)
        return
    for output in outputs:
        output.copy_audio(packet)


class _Output:
    """One MP4 being written: H.264 frames with the upload's timestamps, its audio copied or re-encoded."""

    def __init__(self, path: Path, video_in, audio_in, rate: Fraction):
        self.container = av.open(str(path), mode="w", format="mp4", options={"movflags": "+faststart"})
        self.stream = self.container.add_stream("libx264", rate=rate, options=X264_OPTIONS)
        # yuv420p needs even sides: an odd one gets one copied row or column at its far edge.
        self.stream.width = video_in.codec_context.width + video_in.codec_context.width % 2
        self.stream.height = video_in.codec_context.height + video_in.codec_context.height % 2
        self.stream.pix_fmt = "yuv420p"
        self.stream.time_base = video_in.time_base
        self.audio_in, self.audio_out, self.resampler = audio_in, None, None
        if audio_in is not None:
            if audio_in.codec_context.name in MP4_AUDIO:
                self.audio_out = self.container.add_stream_from_template(audio_in)
            else:
                self.audio_out = self.container.add_stream("aac", rate=audio_in.codec_context.sample_rate)
                self.resampler = av.AudioResampler(
                    format="fltp", layout=audio_in.codec_context.layout, rate=audio_in.codec_context.sample_rate
                )

    def video(self, painted: np.ndarray, source: av.VideoFrame) -> None:
        if painted.shape[1] != self.stream.width or painted.shape[0] != self.stream.height:
            painted = np.pad(
                painted,
                ((0, self.stream.height - painted.shape[0]), (0, self.stream.width - painted.shape[1]), (0, 0)),
                mode="edge",
            )
        frame = av.VideoFrame.from_ndarray(painted, format="bgr24")
        frame.pts, frame.time_base = source.pts, source.time_base
        self.container.mux(self.stream.encode(frame))

    def copy_audio(self, packet: av.Packet) -> None:
        # Muxing rescales the packet's timestamps in place: every output gets the original ones.
        pts, dts, duration = packet.pts, packet.dts, packet.duration
        packet.stream = self.audio_out
        self.container.mux(packet)
        packet.pts, packet.dts, packet.duration = pts, dts, duration

    def encode_audio(self, frames: list) -> None:
        for frame in frames:
            for resampled in self.resampler.resample(frame):
                self.container.mux(self.audio_out.encode(resampled))

    def close(self) -> None:
        try:
            self.container.mux(self.stream.encode(None))
            if self.resampler is not None:
                self.container.mux(self.audio_out.encode(None))
        finally:
            self.container.close()
