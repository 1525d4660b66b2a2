"""How much of an upload the worker takes on, and every refusal of one: checked before any pixel is decoded.

A refusal is a PermanentJobError: the job is archived with its `reason`, never retried.
"""

from django.conf import settings

from jobqueue.api import PermanentJobError

# Larger than any camera's still (a 100 MP medium-format frame), far below a
# decompression bomb: a 20,000 x 20,000 image would need 1.2 GB as BGR.
MAX_PIXELS = 120_000_000
MAX_BYTES = 80 * 1024 * 1024


class UndecodableImage(PermanentJobError):
    """No picture in the bytes, or a header whose pixels do not decode."""

    reason = "undecodable_image"


class ImageTooLarge(PermanentJobError):
    reason = "image_too_large"


class UnsupportedMedia(PermanentJobError):
    """Pages without timing (a TIFF), or frames where only a still will do (a reference selfie): shown from
    one frame, the others' faces would go unseen."""

    reason = "unsupported_media"


class MediaTooLarge(PermanentJobError):
    """Beyond a MEDIA_MAX_* setting; the message names it."""

    reason = "media_too_large"


class UndecodableMedia(PermanentJobError):
    reason = "undecodable_media"


def check_still(size: int, width: int, height: int) -> None:
    """Raise ImageTooLarge for a still of more than MAX_BYTES `size` or MAX_PIXELS, UndecodableImage for an empty
    picture."""
    if size > MAX_BYTES:
        raise ImageTooLarge(f"{size} bytes, limit {MAX_BYTES}")
    if width <= 0 or height <= 0:
        raise UndecodableImage(f"image of size {width}x{height}")
    if width * height > MAX_PIXELS:
        raise ImageTooLarge(f"{width}x{height} is {width * height} pixels, limit {MAX_PIXELS}")


def check_clip(*, frames: int, duration_s: float, width: int, height: int, held_in_memory: bool = False) -> None:
    """Raise MediaTooLarge, naming the setting, for a clip beyond any limit."""
    beyond = []
    if frames > settings.MEDIA_MAX_FRAMES:
        beyond.append(f"{frames} frames > MEDIA_MAX_FRAMES {settings.MEDIA_MAX_FRAMES}")
    if duration_s > settings.MEDIA_MAX_DURATION_S:
        beyond.append(f"{duration_s:.1f} s > MEDIA_MAX_DURATION_S {settings.MEDIA_MAX_DURATION_S:g}")
    if width * height > settings.MEDIA_MAX_FRAME_PIXELS:
        beyond.append(f"{width}x{height} per frame > MEDIA_MAX_FRAME_PIXELS {settings.MEDIA_MAX_FRAME_PIXELS}")
    if held_in_memory and frames * width * height > settings.MEDIA_MAX_ANIMATION_PIXELS:
        most = settings.MEDIA_MAX_ANIMATION_PIXELS
        beyond.append(f"{frames * width * height} pixels in all > MEDIA_MAX_ANIMATION_PIXELS {most}")
    if width <= 0 or height <= 0 or frames <= 0:
        raise UndecodableMedia(f"{frames} frames of {width}x{height}")
    if beyond:
        raise MediaTooLarge("; ".join(beyond))


def check_frame(width: int, height: int) -> None:
    """A video's frame size beyond MEDIA_MAX_FRAME_PIXELS: its header's, before its first frame is decoded, and
    each decoded frame's (a resolution change mid-stream may make one larger than the header said)."""
    if width * height > settings.MEDIA_MAX_FRAME_PIXELS:
        raise MediaTooLarge(f"a {width}x{height} frame > MEDIA_MAX_FRAME_PIXELS")
