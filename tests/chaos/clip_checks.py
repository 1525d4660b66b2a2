"""Animations and videos: rendered frame by frame into files of their kind, never published as themselves."""

from collections import Counter, defaultdict

from tests.chaos.scenes import decode_media
from tests.chaos.storage import MEDIA_EXTENSIONS, Snapshot, exposed_media
from tests.chaos.uploads import MediaUpload
from tests.chaos.worker_logs import ended
from tests.support.stored_files import photo_files, read_bytes


def media_published_as_itself(chaos, snapshot: Snapshot) -> int:
    """Photos with a multi-frame upload published as themselves or not rendered frame by frame: what the monitor
    saw while the run went on, the end's rows and bucket, and each published clip's files (named as the upload, of
    another kind than .webp for an animation or .mp4 for a video, another frame count than the upload's, a
    thumbnail that is no JPEG, a media_type other than the clip's or no duration)."""
    from faces.models import Photo

    seeded = chaos.seeded
    exposed: dict[str, set[str]] = defaultdict(set)
    for photo_id, why in chaos.watch.media_exposed | exposed_media(snapshot, seeded.media_photos, seeded.refused_media):
        exposed[photo_id].add(why)
    checked = 0
    for photo in Photo.objects.published().filter(id__in=list(seeded.media_photos)):
        upload = seeded.media_photos[str(photo.id)]
        files = [(key, thumb) for _, key, thumb in photo_files(photo)]
        exposed[str(photo.id)] |= clip_row_problems(photo, upload)
        for key, thumb in files:
            exposed[str(photo.id)] |= clip_file_problems(photo, upload, key, thumb)
        checked += len(files)
    named = {**{pid: upload.name for pid, upload in seeded.media_photos.items()}, **seeded.refused_media}
    for photo_id in sorted(photo_id for photo_id, problems in exposed.items() if problems):
        chaos.report.notes.append(
            f"multi-frame upload published as itself: photo {photo_id} ({named[photo_id]}): "
            + "; ".join(sorted(exposed[photo_id])[:3])
        )
    chaos.report.figures.media_files_checked = checked
    chaos.report.notes.append(
        f"multi-frame files: {checked} published files of {len(seeded.media_photos)} clips checked against their "
        f"uploads (kind, frame count, JPEG poster); {len(seeded.refused_media)} refused uploads never published"
    )
    return sum(1 for problems in exposed.values() if problems)


def clip_row_problems(photo, upload: MediaUpload) -> set[str]:
    if photo.media_type != upload.kind or not photo.duration_ms:
        return {f"media_type {photo.media_type}, duration_ms {photo.duration_ms}"}
    return set()


def clip_file_problems(photo, upload: MediaUpload, key: str, thumb: str) -> set[str]:
    """What is wrong with one published file of a clip and its thumbnail."""
    if {key, thumb} & {photo.upload_key, photo.upload_thumb_key}:
        return {f"published as itself: {key}, {thumb}"}
    problems = set()
    if not key.endswith(f".{MEDIA_EXTENSIONS[upload.kind]}") or not thumb.endswith("_thumb.jpg"):
        problems.add(f"a file of another kind: {key}, {thumb}")
    if not read_bytes(thumb).startswith(b"\xff\xd8\xff"):
        problems.add(f"a thumbnail that is no JPEG: {thumb}")
    frames = len(decode_media(read_bytes(key), upload.kind)[1])
    if frames != upload.frames:
        problems.add(f"{frames} frames in {key}, {upload.frames} in the upload")
    return problems


def media_summary(chaos, lines: list[dict]) -> str:
    """How each multi-frame upload's jobs ended, from the workers' log lines: the clips, and those refused."""
    seeded, figures = chaos.seeded, chaos.report.figures
    figures.clips, figures.refused_clips = len(seeded.media_photos), len(seeded.refused_media)
    figures.clip_jobs_ended = jobs_ended(lines, seeded.media_photos)
    figures.refused_jobs_ended = jobs_ended(lines, seeded.refused_media)
    return (
        f"multi-frame uploads: {figures.clips} clips, their jobs ended: {said(figures.clip_jobs_ended)}; "
        f"{figures.refused_clips} to refuse, their jobs ended: {said(figures.refused_jobs_ended)}"
    )


def jobs_ended(lines: list[dict], photos) -> dict[str, int]:
    """How the jobs of `photos` ended: by archived reason, else by outcome."""
    ends = Counter(
        fields.get("reason") or fields.get("outcome") for fields in ended(lines) if fields.get("photo_id") in photos
    )
    return dict(sorted(ends.items()))


def said(ends: dict[str, int]) -> str:
    return ", ".join(f"{what} {count}" for what, count in ends.items()) or "never"
