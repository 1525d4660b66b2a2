"""Uploads as the face pass reads them (faces/media/upload.py): `open(data)` gives a Still, an AnimatedImage or a
Video, whichever the bytes are. Importing the package defines every kind's class, so `open` knows each."""

from faces.media.animated import AnimatedImage
from faces.media.still import Still
from faces.media.upload import Media, MediaKind, MediaLimits, open, read_object
from faces.media.video import Video

__all__ = ["AnimatedImage", "Media", "MediaKind", "MediaLimits", "Still", "Video", "open", "read_object"]
