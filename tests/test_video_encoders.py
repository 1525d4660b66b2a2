"""A clip's outputs are encoded side by side (faces/media/video.py, `Video._encode`): each output is the file it would
be if it were rendered alone, an output that fails stops the render with its own error, no encoder left running, and
the encoders split the cores between them."""

import dataclasses
import io
import os
import struct
import threading
from dataclasses import dataclass, field

import av
import cv2
import numpy as np
import pytest

from faces.media.video import Video, painted_patches, put_patches, side_by_side
from faces.rendering.painters import ALWAYS, PAINTING, BlurPainter
from momentlens.devservices import samples
from tests.support import media_clips


@dataclass(frozen=True)
class BoxPainter:
    """Blacks out the DNP guest's scripted box on every frame it is in (or nothing, with no spans)."""

    clip: media_clips.Clip
    spans: list = field(default_factory=lambda: [(0.0, 10.0)])
    broken_after_s: float | None = None

    def __call__(self, time: float, frame) -> None:
        for stroke in self.strokes(time):
            stroke.paint(frame)

    def strokes(self, time: float) -> list["BlackBox"]:
        if self.broken_after_s is not None and time > self.broken_after_s:
            raise RuntimeError("this output's painter broke")
        index = min(round(time * self.clip.fps), len(self.clip.script) - 1)
        box = self.clip.script[index].dnp
        return [] if box is None else [BlackBox(tuple(int(v) for v in box))]


@dataclass(frozen=True)
class BlackBox:
    box: tuple[int, int, int, int]

    def reach(self, width: int, height: int) -> tuple[int, int, int, int]:
        x1, y1, x2, y2 = self.box
        return max(0, x1), max(0, y1), min(width, x2), min(height, y2)

    def paint(self, image, origin=(0, 0)) -> None:
        x1, y1, x2, y2 = self.box
        x, y = origin
        image[max(0, y1 - y) : y2 - y, max(0, x1 - x) : x2 - x] = 0


@pytest.fixture(scope="module")
def clip(group, group_faces):
    return media_clips.mp4(group, group_faces)


def test_outputs_side_by_side_are_the_files_each_would_be_alone(clip):
    """On one x264 thread each (the count side_by_side gives three outputs on two cores, fixed here so that one output
    alone gets it too: x264's files depend on its thread count)."""
    video = Video(clip.data)
    video.limits = dataclasses.replace(video.limits, x264_options={**video.limits.x264_options, "threads": "1"})
    public, own = BoxPainter(clip), BoxPainter(clip, spans=[])

    together = video.render([public, own, public])
    alone = [video.render([painter])[0] for painter in (public, own)]

    assert together[0].data == together[2].data == alone[0].data
    assert together[1].data == alone[1].data
    assert together[0].data != together[1].data  # the public file is painted, the own file is not
    assert [file.poster for file in together] == [alone[0].poster, alone[1].poster, alone[0].poster]


def test_an_output_that_fails_stops_the_render_with_its_error_and_no_encoder_left(clip):
    video = Video(clip.data)

    with pytest.raises(RuntimeError, match="this output's painter broke"):
        video.render([BoxPainter(clip), BoxPainter(clip, broken_after_s=1.0)])

    assert not [thread for thread in threading.enumerate() if thread.name.startswith("encode")]


def test_encoders_side_by_side_split_the_cores_and_one_keeps_its_own_count(monkeypatch):
    options = {"preset": "veryfast", "crf": "20"}
    monkeypatch.setattr(os, "cpu_count", lambda: 8)

    assert side_by_side(options, 1) == options
    assert side_by_side(options, 3)["threads"] == "2"
    assert side_by_side(options, 12)["threads"] == "1"
    assert side_by_side({**options, "threads": "4"}, 3)["threads"] == "4"  # an operator's own count stays


def test_a_frame_painted_in_patches_is_the_frame_painted_whole():
    """A clip's painted frame goes to the encoder as its decoded planes with only the painted patches converted
    (faces/media/video.py, `painted_patches`): every pixel is the one the whole frame painted in BGR and converted
    gives. Overlapping ellipses (painted in order, on one patch), one cut by the frame's edge, one at odd pixels and a
    blur region apart from them."""
    pixels = cv2.resize(samples.group_photo(), (1280, 720))
    height, width = pixels.shape[:2]
    faces = [
        (0.30, 0.30, 0.08, 0.14),
        (0.35, 0.33, 0.08, 0.14),
        (0.96, 0.50, 0.08, 0.14),
        (0.6013, 0.1017, 0.031, 0.047),
    ]
    painter = BlurPainter([], faces, [(101, 601, 263, 687)], width, height, [ALWAYS], PAINTING)
    whole = pixels.copy()
    painter(0.0, whole)
    before = cv2.cvtColor(pixels, cv2.COLOR_BGR2YUV_I420)
    planes = [
        before[:height],
        before[height:].reshape(-1)[: width * height // 4].reshape(height // 2, width // 2),
        before[height:].reshape(-1)[width * height // 4 :].reshape(height // 2, width // 2),
    ]

    patches = painted_patches(pixels, painter.strokes(0.0))
    put_patches(planes, patches)

    assert len(patches) == 4  # the two overlapping ellipses share one patch
    assert np.array_equal(before, cv2.cvtColor(whole, cv2.COLOR_BGR2YUV_I420))
    assert not np.array_equal(pixels, whole)


# A display turn counter-clockwise -> the track header's matrix FFmpeg reads it from, and the turn that shows a
# stored frame as displayed.
DISPLAY_TURNS = {
    90: ((0, -0x10000, 0, 0x10000, 0, 0, 0, 0, 0x40000000), cv2.ROTATE_90_COUNTERCLOCKWISE),
    180: ((-0x10000, 0, 0, 0, -0x10000, 0, 0, 0, 0x40000000), cv2.ROTATE_180),
    270: ((0, 0x10000, 0, -0x10000, 0, 0, 0, 0, 0x40000000), cv2.ROTATE_90_CLOCKWISE),
}


def _noise_mp4(width: int, height: int, frames: int, *, turn: int = 0) -> bytes:
    """An H.264 MP4 of width x height noise frames (a sheared or shifted picture cannot pass for them), with a
    display matrix that turns them `turn` degrees counter-clockwise (a phone held otherwise than its sensor)."""
    stored = np.random.default_rng(0).integers(0, 256, (frames, height, width, 3), np.uint8)
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for index, pixels in enumerate(stored):
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    data = out.getvalue()
    if turn:
        at = data.index(b"tkhd") + 44
        data = data[:at] + struct.pack(">9i", *DISPLAY_TURNS[turn][0]) + data[at + 36 :]
    return data


def _painted_in_place(data: bytes, turn: int = 0) -> None:
    """The clip rendered with a face blurred and with nothing blurred: each output is the upload's picture as shown,
    upright, the face's ellipse blurred in the first and nothing in the second."""
    shown = media_clips.read_video(data).frames[2]
    shown = cv2.rotate(shown, DISPLAY_TURNS[turn][1]) if turn else shown
    height, width = shown.shape[:2]
    video = Video(data)
    assert (video.width, video.height) == (width, height)
    face = BlurPainter([], [(0.4, 0.4, 0.2, 0.2)], [], width, height, [ALWAYS], PAINTING)
    nothing = BlurPainter([], [], [], width, height, [], PAINTING)

    blurred, plain = (media_clips.read_video(file.data).frames[2] for file in video.render([face, nothing]))

    centre = (slice(round(0.45 * height), round(0.55 * height)), slice(round(0.45 * width), round(0.55 * width)))
    assert blurred.shape == plain.shape == (height, width, 3)
    assert blurred[centre].std() < 5 < 40 < shown[centre].std()
    assert np.abs(blurred[:, : width // 4].astype(int) - shown[:, : width // 4]).mean() < 12
    assert np.abs(plain.astype(int) - shown).mean() < 12


def test_a_frame_whose_rows_are_padded_in_memory_is_painted_in_place():
    """A 1000 px wide frame's planes are 1024 bytes a row in FFmpeg's buffers."""
    _painted_in_place(_noise_mp4(1000, 562, 5))


@pytest.mark.parametrize("turn", sorted(DISPLAY_TURNS))
def test_a_phone_clip_stored_turned_is_painted_upright(turn):
    """A clip stored as the phone's sensor saw it, with a display matrix: its planes are turned upright for every
    output, the face's patch painted where the upright picture has it."""
    _painted_in_place(_noise_mp4(640, 360, 5, turn=turn), turn)
