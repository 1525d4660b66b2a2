"""The multi-frame uploads of the seed (clips to render, and three to refuse) and the stills that hold more than
the one picture they show."""

import io
import uuid
from dataclasses import dataclass

import cv2
import numpy as np

from tests.chaos.scenes import (
    MEDIA_SIDE,
    Box,
    Scene,
    decode_media,
    faceless_then,
    guest,
    h264,
    hard_cut_scene,
    uhd_scene,
    variable_rate_times,
    walking_scene,
)


@dataclass(frozen=True)
class MediaUpload:
    """A multi-frame upload of the seed and what the seed knows of it: the truth its files are held to."""

    name: str
    kind: str  # the photos.media_type it must get: "animated" or "video"
    frames: int  # how many frames the upload decodes to
    # Per frame: (DNP member, face box in pixels) of each DNP member's face the seed pasted into it.
    dnp: tuple[tuple[tuple[uuid.UUID, Box], ...], ...]


def media_uploads(group: np.ndarray, group_faces, plain_event, hostile_event, dnp: dict[int, uuid.UUID]) -> list:
    """(MediaUpload, bytes, job, event, blur regions) of each multi-frame upload: animated GIF, WebP and APNG,
    MP4 (OpenCV's MPEG-4 part 2, 10 fps; PyAV's H.264, 30 fps), WebM and MOV, each at most 640x360. Some show a
    DNP member's face only after a faceless frame 0: two animations, and a 30 fps video in which one walks in
    between two detections (every 0.2 s), walks off and comes back elsewhere, while another DNP member stands; and
    a hard cut from a guest to a DNP member at another place."""
    from tests.support.media_samples import animation, video

    crowd, alone, walking, uhd = clip_scenes(group, group_faces, dnp)
    cut = hard_cut_scene(group, group_faces, dnp)
    variable_times = variable_rate_times(len(walking.frames))
    region = [{"x": 0.1, "y": 0.1, "w": 0.2, "h": 0.2}]
    # thumbnail_dims in the event without DNP members once published a still as the upload itself.
    uploads = [
        ("animated GIF", "animated", crowd, animation(crowd.frames, "GIF"), "thumbnail_dims", plain_event, []),
        ("APNG", "animated", crowd, animation(crowd.frames, "PNG"), "thumbnail_dims", plain_event, []),
        ("MP4", "video", crowd, video(crowd.frames, ".mp4"), "thumbnail_dims", plain_event, []),
        ("MP4 with a blur region", "video", crowd, video(crowd.frames, ".mp4"), "thumbnail_dims", plain_event,
         region),
        ("animated WebP", "animated", crowd, animation(crowd.frames, "WEBP"), "face_process", hostile_event, []),
        ("WebM", "video", crowd, video(crowd.frames, ".webm"), "face_process", hostile_event, []),
        ("MOV", "video", crowd, video(crowd.frames, ".mov"), "thumbnail_dims", hostile_event, []),
        ("animated WebP, DNP face after a faceless frame 0", "animated", alone, animation(alone.frames, "WEBP"),
         "face_process", hostile_event, []),
        ("animated GIF, DNP face after a faceless frame 0", "animated", alone, animation(alone.frames, "GIF"),
         "thumbnail_dims", hostile_event, []),
        ("MP4 30 fps H.264, DNP face walks in after frame 0", "video", walking, h264(walking.frames, fps=30),
         "face_process", hostile_event, []),
        ("MP4, variable frame rate 30-20-30 fps", "video", walking, h264(walking.frames, 30, variable_times),
         "face_process", hostile_event, []),
        ("MP4 4K, faces 30-35 px", "video", uhd, h264(uhd.frames, fps=30), "face_process", hostile_event, []),
        ("MP4, a hard cut from a guest to a DNP member", "video", cut, h264(cut.frames, fps=30), "face_process",
         hostile_event, []),
    ]  # fmt: skip
    return [
        (seed_truth(name, kind, scene, data, dnp if event is hostile_event else {}), data, job, event, regions)
        for name, kind, scene, data, job, event, regions in uploads
    ]


def clip_scenes(group: np.ndarray, group_faces, dnp: dict[int, uuid.UUID]) -> tuple[Scene, Scene, Scene, Scene]:
    """t1 shrunk to 360 px high, a DNP member alone (each after a faceless frame 0), the walk, and 4K."""
    scale = MEDIA_SIDE / group.shape[0]
    small = cv2.resize(group, (round(group.shape[1] * scale), MEDIA_SIDE), interpolation=cv2.INTER_AREA)
    everyone = [(index, tuple(float(v) * scale for v in face.box)) for index, face in enumerate(group_faces)]
    walker = min(dnp, default=0)
    portrait, box = guest(group, group_faces[walker].box, scale=1.2)
    crowd = faceless_then(small, everyone)
    alone = faceless_then(portrait, [(walker, box)])
    return crowd, alone, walking_scene(group, group_faces, dnp), uhd_scene(group, group_faces)


def seed_truth(name: str, kind: str, scene: Scene, data: bytes, dnp: dict[int, uuid.UUID]) -> MediaUpload:
    """What the seed knows of a clip: its frame count (its bytes decode to every frame drawn) and where each DNP
    member's face is in each frame."""
    frames = len(decode_media(data, kind)[1])
    assert frames == len(scene.frames), f"{name}: {frames} frames decoded of the {len(scene.frames)} encoded"
    shown = [tuple((dnp[index], box) for index, box in seen if index in dnp) for seen in scene.shown]
    return MediaUpload(name, kind, frames, tuple(shown))


def still_uploads(group: np.ndarray, group_faces, plain_event, hostile_event, dnp: dict[int, uuid.UUID]) -> list:
    """(name, bytes, job, event) of each still whose bytes hold more than the one picture shown, or show it
    turned (tests/support/still_samples.py). Those with a picture hidden in the bytes show a guest who is no DNP
    member and hide t1 (or a DNP member's portrait) elsewhere: an MP4 after the end, an Exif thumbnail, XMP's
    GImage:Data, a JPEG after the end, an MPO picture behind an Ultra HDR marker or not. The others show t1
    with an Exif or irot orientation, in a PNG's alpha channel, or turned in the picture itself."""
    from tests.support import still_samples as made
    from tests.support.media_samples import video

    plain_guest = next((i for i in range(len(group_faces)) if i not in dnp), 0)
    shown = np.ascontiguousarray(guest(group, group_faces[plain_guest].box, scale=1.0)[0])
    portrait = made.jpeg(guest(group, group_faces[min(dnp, default=0)].box, scale=1.0)[0])
    return [
        ("motion photo", made.motion_photo(shown, video([group] * 4, ".mp4")), "face_process", hostile_event),
        ("Exif thumbnail", made.with_segments(shown, made.exif(thumbnail=portrait)), "thumbnail_dims", hostile_event),
        ("XMP GImage:Data", made.with_segments(shown, made.gimage(portrait)), "face_process", hostile_event),
        ("JPEG after the end", made.with_segments(shown, after=made.jpeg(group)), "thumbnail_dims", hostile_event),
        ("JPEG after the end, no DNP member", made.with_segments(shown, after=made.jpeg(group)), "thumbnail_dims",
         plain_event),
        ("Ultra HDR MPO", made.mpo(shown, group, ultra_hdr=True), "face_process", hostile_event),
        ("MPO", made.mpo(shown, group), "thumbnail_dims", hostile_event),
        ("JPEG, Exif orientation 6", made.oriented_jpeg(group, 6), "face_process", hostile_event),
        ("JPEG, Exif orientation 3", made.oriented_jpeg(group, 3), "thumbnail_dims", hostile_event),
        ("PNG, Exif orientation 6", made.oriented_png(group, 6), "face_process", hostile_event),
        ("HEIC, irot", made.turned_heif(group, 8, "HEIF"), "face_process", hostile_event),
        ("AVIF, irot, no DNP member", made.turned_heif(group, 6, "AVIF"), "thumbnail_dims", plain_event),
        ("PNG, t1 in its alpha channel", made.face_in_alpha(group), "face_process", hostile_event),
        ("t1 turned 90 degrees, no tag", made.jpeg(np.rot90(group, 1)), "face_process", hostile_event),
        ("t1 upside down, no tag", made.jpeg(np.rot90(group, 2)), "thumbnail_dims", hostile_event),
    ]  # fmt: skip


def refused_media(group: np.ndarray) -> dict[str, bytes]:
    """Multi-frame uploads the worker must archive: pages (unsupported_media), a GIF longer than
    MEDIA_MAX_DURATION_S (media_too_large), an MP4 cut before its index (undecodable_media)."""
    from django.conf import settings
    from PIL import Image

    small = cv2.resize(group, (160, 111), interpolation=cv2.INTER_AREA)
    pages = [Image.fromarray(cv2.cvtColor(small, cv2.COLOR_BGR2RGB)), Image.fromarray(np.full_like(small, 90))]
    tiff, gif = io.BytesIO(), io.BytesIO()
    pages[0].save(tiff, "TIFF", save_all=True, append_images=pages[1:])
    # Two frames, each three quarters of the longest duration allowed.
    pages[0].save(gif, "GIF", save_all=True, append_images=pages[1:], duration=int(settings.MEDIA_MAX_DURATION_S * 750))
    clip = h264([small[:110], small[:110, ::-1]] * 5, fps=10)  # the moov box comes last: cut, there is none
    return {"multi-page TIFF": tiff.getvalue(), "GIF too long": gif.getvalue(), "MP4 cut short": clip[: len(clip) // 2]}
