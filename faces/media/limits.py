"""How much of a clip the worker takes on: settings, checked before any frame is decoded."""

from django.conf import settings

from jobqueue.errors import PermanentJobError


class MediaTooLarge(PermanentJobError):
    reason = "media_too_large"


class UndecodableMedia(PermanentJobError):
    reason = "undecodable_media"


def check(*, frames: int, duration_s: float, width: int, height: int, held_in_memory: bool = False) -> None:
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
