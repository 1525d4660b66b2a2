"""Uploads as the face pass reads them (docs/ARCHITECTURE.md §5, §11): `open(data)` gives a Still, an
AnimatedImage or a Video, whichever the bytes are, its limits checked before any pixel is decoded."""

from faces.media.animated import AnimatedImage
from faces.media.kinds import MediaKind, media_kind
from faces.media.media import Media
from faces.media.still import Still
from faces.media.video import Video

OPENED_AS = {MediaKind.IMAGE: Still, MediaKind.ANIMATED: AnimatedImage, MediaKind.VIDEO: Video}


def open(data: bytes) -> Still | AnimatedImage | Video:
    """The upload, as the class of its kind (faces/media/kinds.py); each refuses what is beyond its limits."""
    return OPENED_AS[media_kind(data)](data)


__all__ = ["AnimatedImage", "Media", "MediaKind", "Still", "Video", "open"]
