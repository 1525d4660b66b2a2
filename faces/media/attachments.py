"""What a still's bytes carry besides the one picture the worker decodes (docs/ARCHITECTURE.md §5, rule 4).

An upload may be published as itself only when its bytes hold exactly that picture. Files
carry more than one all the time: a phone's motion photo appends an MP4 after the JPEG's
end, Ultra HDR appends a gain map behind an MPF index, Exif keeps a thumbnail (an editor's
crop often keeps the uncropped one), XMP embeds whole images (GImage, GDepth), Photoshop
resources and FlashPix segments hold previews, and any bytes may follow the image's end.

So this is an allow-list, not a hunt for known attachments: a JPEG is plain when it holds
only the segments a decoder needs (quantisation and Huffman tables, one baseline, extended
or progressive frame, its scans), a JFIF header without a thumbnail, an ICC profile, an
Adobe colour marker and an Exif block that holds no second IFD (its thumbnail), no embedded
JPEG (maker-note previews) and no orientation, then nothing after its end. A PNG is plain
when it holds only the chunks that decide its pixels and colours, then nothing after IEND. A
WebP is plain in its simple format: one VP8 or VP8L bitstream and nothing else (the extended
format's chunks hold Exif, XMP, frames). Every other format is never plain: its container can
hold pictures this scan does not read.
`attachments` names what it found; an empty list is a plain file. A file that is not plain
is not refused: its public file is rendered from the decoded picture, like any other file.
"""

import re
import struct

# Exif IFD0's orientation tag.
ORIENTATION_TAG = 0x0112

# JPEG markers a plain file may hold besides SOI, APPn and EOI: one frame (SOF0 baseline,
# SOF1 extended, SOF2 progressive), DHT, DQT, DRI; SOS is followed by entropy-coded data.
_SOF = {0xC0, 0xC1, 0xC2}
_TABLES = {0xC4, 0xDB, 0xDD}
_SOS, _EOI = 0xDA, 0xD9
# In entropy-coded data a 0xFF is followed by 0x00 (a stuffed byte) or a restart marker;
# anything else is the next marker.
_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7]")
_JPEG_START = b"\xff\xd8\xff"

# The APPn segments a plain JPEG may hold, by marker and signature. Exif is read further.
_JFIF, _EXIF, _ICC, _ADOBE = b"JFIF\x00", b"Exif\x00\x00", b"ICC_PROFILE\x00", b"Adobe"

# PNG chunks that decide the pixels and how they look, and nothing else.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PLAIN_PNG_CHUNKS = {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"pHYs"}


def attachments(data: bytes, image_format: str) -> list[str]:
    """What the bytes hold besides the one picture a decoder shows; [] for a plain JPEG or PNG."""
    if image_format == "JPEG" and data.startswith(_JPEG_START):
        return _jpeg(data)
    if image_format == "PNG" and data.startswith(_PNG_SIGNATURE):
        return _png(data)
    if image_format == "WEBP" and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return [f"{image_format} (no such file is published as uploaded)"]


def _jpeg(data: bytes) -> list[str]:
    found, frames, exif_blocks, position = [], 0, 0, 2
    while True:
        while data[position : position + 2] == b"\xff\xff":
            position += 1  # fill bytes before a marker
        if position + 2 > len(data) or data[position] != 0xFF:
            return [*found, "a JPEG that ends before its end marker"]
        marker = data[position + 1]
        if marker == _EOI:
            break
        if position + 4 > len(data):
            return [*found, "a JPEG that ends before its end marker"]
        length = struct.unpack(">H", data[position + 2 : position + 4])[0]
        payload = data[position + 4 : position + 2 + length]
        position += 2 + length
        if marker == _SOS:
            after = _NEXT_MARKER.search(data, position)
            position = after.start() if after else len(data)
        elif marker in _SOF:
            frames += 1
            if frames == 2:
                found.append("a second frame")
        elif marker == 0xE1 and payload.startswith(_EXIF):
            exif_blocks += 1
            found += _exif(payload[len(_EXIF) :]) if exif_blocks == 1 else ["a second Exif block"]
        elif marker not in _TABLES:
            found += _app_segment(marker, payload)
    trailing = len(data) - (position + 2)
    return [*found, f"{trailing} bytes after the image's end"] if trailing else found


def _app_segment(marker: int, payload: bytes) -> list[str]:
    """[] for an APPn segment a plain JPEG may hold; else what it is."""
    if marker == 0xE0 and payload.startswith(_JFIF):
        return ["a JFIF thumbnail"] if payload[12:14] not in (b"", b"\x00\x00", b"\x00") else []
    if (marker == 0xE2 and payload.startswith(_ICC)) or (marker == 0xEE and payload.startswith(_ADOBE)):
        return []
    return [_named_segment(marker, payload)]


def _named_segment(marker: int, payload: bytes) -> str:
    if marker == 0xE1 and payload.startswith(b"http://ns.adobe.com/xap/1.0/"):
        return "an XMP packet (it may embed images: GImage, GDepth, a motion photo's or gain map's index)"
    if marker == 0xE1 and payload.startswith(b"http://ns.adobe.com/xmp/extension/"):
        return "an extended XMP packet"
    if marker == 0xE2 and payload.startswith(b"MPF\x00"):
        return "a multi-picture (MPF) index: further images follow"
    if marker == 0xE0 and payload.startswith(b"JFXX\x00"):
        return "a JFIF extension thumbnail"
    if marker == 0xED:
        return "Photoshop resources (they may hold a thumbnail)"
    if marker == 0xFE:
        return "a comment"
    if 0xE0 <= marker <= 0xEF:
        return f"an APP{marker - 0xE0} segment"
    return f"a 0x{marker:02X} segment"


def _exif(tiff: bytes) -> list[str]:
    """What an Exif block holds beyond tags: a thumbnail (a second IFD), embedded JPEGs, an orientation."""
    found = ["a JPEG inside the Exif block (a thumbnail or a maker note's preview)"] if b"\xff\xd8" in tiff else []
    try:
        order = {b"II": "<", b"MM": ">"}[tiff[:2]]
        first = struct.unpack(order + "I", tiff[4:8])[0]
        count = struct.unpack(order + "H", tiff[first : first + 2])[0]
        entries = tiff[first + 2 : first + 2 + 12 * count]
        following = struct.unpack(order + "I", tiff[first + 2 + 12 * count : first + 6 + 12 * count])[0]
    except (KeyError, struct.error):
        return [*found, "an Exif block that does not parse"]
    for index in range(count):
        tag, kind, _, value = struct.unpack(order + "HHI4s", entries[12 * index : 12 * index + 12])
        if tag == ORIENTATION_TAG:
            orientation = struct.unpack(order + "H", value[:2])[0] if kind == 3 else None
            if orientation != 1:
                found.append(f"an orientation (Exif {orientation})")
    if following:
        found.append("an Exif thumbnail (a second IFD)")
    return found


def _png(data: bytes) -> list[str]:
    found, position = [], len(_PNG_SIGNATURE)
    while True:
        if position + 8 > len(data):
            return [*found, "a PNG that ends before IEND"]
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        position += 12 + length
        if kind not in _PLAIN_PNG_CHUNKS:
            found.append(f"a PNG {kind.decode('latin-1')!r} chunk")
        if kind == b"IEND":
            break
    trailing = len(data) - position
    return [*found, f"{trailing} bytes after the image's end"] if trailing > 0 else found


def _webp(data: bytes) -> list[str]:
    riff_end = 8 + struct.unpack("<I", data[4:8])[0]
    kind = data[12:16]
    if kind not in (b"VP8 ", b"VP8L") or len(data) < 20:
        found = [f"a WebP {kind.decode('latin-1')!r} chunk (the extended format: Exif, XMP, alpha or frames)"]
    else:
        length = struct.unpack("<I", data[16:20])[0]
        found = ["further WebP chunks"] if 20 + length + (length & 1) < riff_end else []
    trailing = len(data) - riff_end
    return [*found, f"{trailing} bytes after the image's end"] if trailing > 0 else found
