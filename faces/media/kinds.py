"""What an upload is, from its bytes, never from its key's suffix (`media_kind`).

A still (JPEG, PNG, WebP, HEIC/HEIF, AVIF; an MPO or Ultra HDR JPEG is a still shown from its
primary picture), an animated image (more than one frame) or a video container; `faces.media.open`
opens each as its own class (faces/media/__init__.py).
"""

import contextlib
import enum
import io
import re

import pillow_heif
from PIL import Image

from faces.media.limits import ImageTooLarge, UndecodableImage, UnsupportedMedia
from jobqueue.api import PermanentJobError

# HEIC/HEIF stills (iPhones) open in Pillow like any other image; OpenCV cannot decode them.
pillow_heif.register_heif_opener()

# ISO base media (MP4, MOV, 3GP, HEIF) starts with a box `....ftyp{brand}`; these
# brands are images Pillow opens (HEIF/AVIF); every other brand is a movie.
# An AVIF image sequence (`avis`) is an animation Pillow reads frame by frame with its timing,
# where FFmpeg reads its first image only.
STILL_FTYP_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"mif1", b"avif", b"avis"}
MATROSKA_MAGIC = b"\x1a\x45\xdf\xa3"  # WebM and MKV
# Multi-frame formats that are animations. Other multi-frame files (TIFF pages) have no
# timing to keep and no primary page: unsupported media.
ANIMATION_FORMATS = {"GIF", "WEBP", "PNG", "AVIF"}
# Several pictures, one of them primary (MPO: stereo pairs, previews, Ultra HDR gain maps; a HEIF
# collection): a still, shown and rendered from its primary picture (faces/media/still.py).
PRIMARY_PICTURE_FORMATS = {"MPO", "HEIF"}
# FFmpeg's demuxers of images, by name: what they read is an image for Pillow, never a video.
IMAGE_DEMUXERS = re.compile(r"pipe|image2|gif|apng|webp")


class MediaKind(enum.StrEnum):
    """`photos.media_type`."""

    IMAGE = "image"
    ANIMATED = "animated"
    VIDEO = "video"


def media_kind(data: bytes) -> MediaKind:
    """What the bytes are, whatever the key says; UndecodableImage when they are none of them."""
    if not data:
        raise UndecodableImage("zero bytes")
    if video_container(data):
        return MediaKind.VIDEO
    try:
        with image_header(data) as header:
            if not is_multi_frame(header):
                return MediaKind.IMAGE
            if header.format not in ANIMATION_FORMATS:
                raise UnsupportedMedia(f"a {header.format} with more than one frame (pages, not an animation)")
            return MediaKind.ANIMATED
    except UndecodableImage:
        if ffmpeg_video(data):
            return MediaKind.VIDEO
        raise


def ffmpeg_video(data: bytes) -> str | None:
    """The container's name when FFmpeg's probe reads a video stream in the bytes (MPEG-TS and camcorders'
    .MTS, MPEG-PS, ASF, FLV: every container it reads), else None. Its readers of images (`*_pipe`,
    `image2`, GIF, APNG, WebP) are not videos: an image Pillow could not read is an undecodable image."""
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            name = container.format.name
            if container.streams.video and not IMAGE_DEMUXERS.search(name):
                return name
    except (av.FFmpegError, ValueError, OSError):  # not a container FFmpeg reads
        return None
    return None


@contextlib.contextmanager
def image_header(data: bytes):
    """The image, open; whatever Pillow raises while it is read (a GIF cut short fails only when its
    frames are counted) is a bad upload, never retried."""
    if not data:
        raise UndecodableImage("zero bytes")
    try:
        with Image.open(io.BytesIO(data)) as header:
            yield header
    except PermanentJobError:
        raise
    except Image.DecompressionBombError as error:
        raise ImageTooLarge(str(error)) from None
    except Exception as error:  # Pillow raises many types for bad headers
        raise UndecodableImage(f"not an image: {type(error).__name__}: {error}") from None


@contextlib.contextmanager
def still_header(data: bytes):
    """The header of an upload that must be one picture (a still); a video container or a multi-frame image
    is refused: unsupported_media."""
    container = video_container(data)
    if container:
        raise UnsupportedMedia(f"a video container ({container}), where only a still will do")
    with image_header(data) as header:
        if is_multi_frame(header):
            raise UnsupportedMedia(f"a {header.format} with more than one frame, where only a still will do")
        yield header


def video_container(data: bytes) -> str | None:
    """The container's name when the bytes are a video container (whatever the key says), else None."""
    if data[4:8] == b"ftyp" and data[8:12] not in STILL_FTYP_BRANDS:
        return f"ISO media, brand {data[8:12].decode('latin-1').strip()!r}"
    if data.startswith(MATROSKA_MAGIC):
        return "WebM/Matroska"
    if data.startswith(b"RIFF") and data[8:12] == b"AVI ":
        return "AVI"
    return None


def is_multi_frame(header: Image.Image) -> bool:
    """More than one frame to show in turn. A file of several pictures with a primary one (MPO, Ultra HDR,
    a HEIF collection) is a still: the primary picture is what a viewer is shown."""
    if header.format in PRIMARY_PICTURE_FORMATS:
        return False
    # is_animated looks no further than a second frame; n_frames covers multi-page formats without it.
    return bool(getattr(header, "is_animated", False)) or getattr(header, "n_frames", 1) > 1
