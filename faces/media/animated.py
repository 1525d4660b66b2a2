"""Animated GIF, WebP and APNG in; animated WebP out, with each frame's duration and the loop count.

Pillow decodes (it composes each frame onto the canvas, so every frame is whole) and writes
WebP through libwebp's animation encoder, which takes every frame at once: the whole
animation is held in memory, bounded by MEDIA_MAX_ANIMATION_PIXELS. A transparent frame is
looked at, and written, as a page shows it: over white (faces/media/still.py, `over_white`),
so a face drawn in the alpha channel is seen, and the output is opaque.

Every frame Pillow reads is a frame of the output, at the time a browser shows it (a frame of 10 ms or less
plays for 100 ms). An APNG's default image that is not part of its animation (what a viewer without APNG, and
the file's first look, shows) is read as the first frame: it is looked at like every other, and published
blurred, as the output's first frame and its poster.
"""

import io
from collections.abc import Iterator

import cv2
import numpy as np
from PIL import Image

from faces.checkpoint import Checkpoint, never_stop
from faces.media.clip import Clip
from faces.media.still import over_white
from faces.media.upload import (
    MediaKind,
    MediaLimits,
    MediaTooLarge,
    Painter,
    RenderedFile,
    UndecodableMedia,
    pillow_opened,
    poster,
)

# Browsers show a frame that asks for this many milliseconds or fewer (0 included) for PLAYED_INSTEAD_MS
# (Chromium and Firefox alike, for GIF, APNG and WebP): that is what a viewer sees, and it gives every frame
# a time of its own, so a frame is never two frames' moment.
SHORTEST_PLAYED_MS, PLAYED_INSTEAD_MS = 10, 100


class AnimatedImage(Clip):
    kind = MediaKind.ANIMATED
    extension = "webp"
    every_frame = True

    def __init__(self, data: bytes, limits: MediaLimits | None = None):
        super().__init__(data, limits)
        with _opened(data) as image:
            self.width, self.height = image.size
            count = image.n_frames
            self.limits.check_clip(
                frames=count, duration_s=0, width=self.width, height=self.height, held_in_memory=True
            )
            self.durations_ms = [_duration(image, index) for index in range(count)]
            # A GIF without a loop extension plays once; WebP and APNG say 0 (forever) when they loop.
            self.loop = int(image.info.get("loop", 1 if image.format == "GIF" else 0))
        self.duration_ms = sum(self.durations_ms)
        self.limits.check_clip(frames=count, duration_s=self.duration_ms / 1000, width=self.width, height=self.height)
        self.frame_count = count
        starts = np.cumsum([0, *self.durations_ms[:-1]])
        self.frame_times = [float(start) / 1000 for start in starts]

    def frames(self) -> Iterator[tuple[float, np.ndarray]]:
        for time, rgba in zip(self.frame_times, self._rgba_frames(), strict=True):
            yield time, cv2.cvtColor(over_white(rgba), cv2.COLOR_RGB2BGR)

    def render(self, painters: list[Painter], checkpoint: Checkpoint = never_stop) -> list[RenderedFile]:
        # One output at a time: the source frames are decoded again for each, so memory holds
        # one rendered animation, not N+1 of them.
        rendered = [self._render_one(painter, checkpoint) for painter in painters]
        checkpoint()  # once more before any upload
        return rendered

    def _render_one(self, painter: Painter, checkpoint: Checkpoint) -> RenderedFile:
        out, first, previous = [], None, None
        for time, rgba in zip(self.frame_times, self._rgba_frames(), strict=True):
            checkpoint()
            bgr = cv2.cvtColor(over_white(rgba), cv2.COLOR_RGB2BGR)
            painter(time, bgr)
            first = bgr if first is None else first
            painted = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA)
            if previous is not None and np.array_equal(painted, previous):
                # libwebp folds a frame identical to the one before into that frame's duration; one
                # unit of one pixel's alpha keeps the upload's frame count (and frame N is frame N).
                painted[0, 0, 3] ^= 1
            previous = painted
            out.append(Image.fromarray(painted, "RGBA"))
        buffer = io.BytesIO()
        # No metadata is copied: the frames are new images; exif/xmp empty say so explicitly.
        out[0].save(
            buffer,
            "WEBP",
            save_all=True,
            append_images=out[1:],
            duration=self.durations_ms,
            loop=self.loop,
            quality=self.limits.webp_quality,
            exif=b"",
            xmp=b"",
        )
        return RenderedFile(buffer.getvalue(), poster(first, self.limits))

    def _rgba_frames(self) -> Iterator[np.ndarray]:
        with _opened(self.data) as image:
            for index in range(self.frame_count):
                yield _rgba(image, index)


def _opened(data: bytes):
    """The animation, open; anything Pillow cannot read in it is undecodable media."""
    return pillow_opened(data, MediaTooLarge, UndecodableMedia, "a frame does not decode")


def _rgba(image: Image.Image, index: int) -> np.ndarray:
    image.seek(index)
    return np.asarray(image.convert("RGBA"))


def _duration(image: Image.Image, index: int) -> int:
    """How long a browser shows the frame, in milliseconds."""
    image.seek(index)
    image.load()  # WebP reads a frame's duration when it decodes it
    asked = int(image.info.get("duration", 0) or 0)
    return PLAYED_INSTEAD_MS if asked <= SHORTEST_PLAYED_MS else asked
