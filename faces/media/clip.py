"""What an animated image and a video share: frames over time, never published as itself (docs/ARCHITECTURE.md §11)."""

from faces.media.upload import Media


class Clip(Media):
    # An animated image is detected on every frame; a video on a cadence (faces/tracks.py).
    every_frame: bool
    frame_count: int
    duration_ms: int
