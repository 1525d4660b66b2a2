"""Stills as phones, editors and attackers make them: more pictures in the bytes than the one a decoder shows,
orientation tags, transparency. Each is built byte by byte from real pixels, as the format's writers lay it out."""

import base64
import io
import struct

import cv2
import numpy as np
import pillow_heif
from PIL import Image

pillow_heif.register_heif_opener()

SOI = b"\xff\xd8"


def jpeg(image: np.ndarray, quality: int = 92) -> bytes:
    """A plain JPEG (OpenCV writes a JFIF header and nothing else)."""
    return cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])[1].tobytes()


def segment(marker: int, payload: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


def with_segments(image: np.ndarray, *segments: bytes, after: bytes = b"") -> bytes:
    """A JPEG of `image` with `segments` right after its start marker and `after` past its end marker."""
    data = jpeg(image)
    return data[:2] + b"".join(segments) + data[2:] + after


def exif(*, orientation: int | None = None, thumbnail: bytes | None = None) -> bytes:
    """An APP1 Exif segment (little-endian TIFF): IFD0 with the orientation; IFD1 holding `thumbnail` (a JPEG)."""
    entries = [(0x0112, 3, 1, struct.pack("<H", orientation) + b"\0\0")] if orientation else []
    ifd0_size = 2 + 12 * len(entries) + 4
    ifd1_at = 8 + ifd0_size if thumbnail else 0
    tiff = b"II*\x00" + struct.pack("<I", 8)
    tiff += _ifd(entries, following=ifd1_at)
    if thumbnail:
        thumb_at = ifd1_at + 2 + 12 * 3 + 4
        ifd1 = [
            (0x0103, 3, 1, struct.pack("<H", 6) + b"\0\0"),  # compression: JPEG
            (0x0201, 4, 1, struct.pack("<I", thumb_at)),
            (0x0202, 4, 1, struct.pack("<I", len(thumbnail))),
        ]
        tiff += _ifd(ifd1, following=0) + thumbnail
    return segment(0xE1, b"Exif\x00\x00" + tiff)


def _ifd(entries: list, following: int) -> bytes:
    packed = b"".join(struct.pack("<HHI", tag, kind, count) + value for tag, kind, count, value in entries)
    return struct.pack("<H", len(entries)) + packed + struct.pack("<I", following)


def xmp(body: str) -> bytes:
    packet = f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">{body}</rdf:RDF></x:xmpmeta>'
    return segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00" + packet.encode())


def gimage(picture: bytes) -> bytes:
    """XMP carrying a whole JPEG as Google's GImage:Data (portrait mode's original)."""
    data = base64.b64encode(picture).decode()
    return xmp(
        '<rdf:Description xmlns:GImage="http://ns.google.com/photos/1.0/image/" '
        f'GImage:Mime="image/jpeg" GImage:Data="{data}"/>'
    )


def motion_photo(still: np.ndarray, video: bytes) -> bytes:
    """A Pixel/Samsung motion photo: the JPEG, its XMP pointing past the end, the MP4 appended."""
    return with_segments(
        still,
        xmp(
            '<rdf:Description xmlns:GCamera="http://ns.google.com/photos/1.0/camera/" '
            f'GCamera:MotionPhoto="1" GCamera:MicroVideo="1" GCamera:MicroVideoOffset="{len(video)}"/>'
        ),
        after=video,
    )


def mpo(primary: np.ndarray, second: np.ndarray, *, ultra_hdr: bool = False) -> bytes:
    """A multi-picture file (Pillow's MPO writer: an MPF index in the first picture, the second appended).
    `ultra_hdr` adds the gain-map XMP, with which Pillow reads the file as a plain JPEG."""
    frames = [Image.fromarray(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)) for image in (primary, second)]
    out = io.BytesIO()
    frames[0].save(out, "MPO", save_all=True, append_images=frames[1:], quality=92)
    data = out.getvalue()
    if ultra_hdr:
        marker = xmp('<rdf:Description xmlns:hdrgm="http://ns.adobe.com/hdr-gain-map/1.0/" hdrgm:Version="1.0"/>')
        data = data[:2] + marker + data[2:]
    return data


def oriented_jpeg(upright: np.ndarray, orientation: int) -> bytes:
    """What a phone writes: the sensor's pixels (`upright` turned back) and the Exif tag that turns them upright."""
    return with_segments(stored_for(upright, orientation), exif(orientation=orientation))


def stored_for(upright: np.ndarray, orientation: int) -> np.ndarray:
    """The pixels that Exif `orientation` turns into `upright`."""
    undo = {3: cv2.ROTATE_180, 6: cv2.ROTATE_90_COUNTERCLOCKWISE, 8: cv2.ROTATE_90_CLOCKWISE}[orientation]
    return cv2.rotate(upright, undo)


def oriented_png(upright: np.ndarray, orientation: int) -> bytes:
    """A PNG with an eXIf chunk whose orientation turns the stored pixels upright."""
    tag = Image.Exif()
    tag[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(cv2.cvtColor(stored_for(upright, orientation), cv2.COLOR_BGR2RGB)).save(
        out, "PNG", exif=tag.tobytes()
    )
    return out.getvalue()


def turned_heif(upright: np.ndarray, orientation: int, fmt: str) -> bytes:
    """A HEIC or AVIF whose `irot` turns the stored pixels upright (pillow-heif and Pillow write the
    Exif orientation they are given as `irot`/`imir`)."""
    image = Image.fromarray(cv2.cvtColor(stored_for(upright, orientation), cv2.COLOR_BGR2RGB))
    tag = Image.Exif()
    tag[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, fmt, exif=tag.tobytes(), quality=90)
    data = out.getvalue()
    assert b"irot" in data, f"the {fmt} writer did not write an irot box"
    return data


def face_in_alpha(image: np.ndarray) -> bytes:
    """A PNG whose colour is black and whose alpha is the picture's darkness: on a white page it shows the
    picture (in grey), while its colour channels alone show nothing."""
    out = io.BytesIO()
    _in_alpha(image).save(out, "PNG")
    return out.getvalue()


def animation_in_alpha(frames: list[np.ndarray]) -> bytes:
    """An animated WebP (lossless, 100 ms a frame) of `frames`, each drawn in the alpha channel alone."""
    images = [_in_alpha(frame) for frame in frames]
    out = io.BytesIO()
    images[0].save(out, "WEBP", save_all=True, append_images=images[1:], duration=100, loop=0, lossless=True)
    return out.getvalue()


def _in_alpha(image: np.ndarray) -> Image.Image:
    rgba = np.zeros((*image.shape[:2], 4), np.uint8)
    rgba[..., 3] = 255 - cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    return Image.fromarray(rgba, "RGBA")
