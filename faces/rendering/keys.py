"""Derived object keys (docs/ARCHITECTURE.md §3). Only the worker builds these, always versioned.

A render's folder is `v{version}.{try}`: the version its rows will commit, and a token of the try that
writes it. Two tries of one version (a try cut off from its session, still uploading, and the retry that
commits) never write the same key, so no try ever replaces an object a committed row names. Keys written
before the token (`v{version}/`) are still derived keys: read, swept, never written again.
"""

import re
import secrets
import uuid
from dataclasses import dataclass

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Every shape the worker writes, and so the only shapes it may ever delete.
DERIVED_KEY = re.compile(
    rf"^events/(?P<event>{UUID})/photos/(?P<photo>{UUID})/v(?P<version>[1-9][0-9]*)(?:\.[0-9a-f]{{8}})?/"
    rf"(?:public|user_{UUID})(?:_thumb)?\.(?:jpg|webp|mp4)$"
)


def photo_prefix(event_id, photo_id) -> str:
    return f"events/{event_id}/photos/{photo_id}/"


@dataclass(frozen=True)
class RenderKeys:
    """The keys one try's render writes: its folder, and each file's key and its thumbnail's, by viewer (None:
    the public file)."""

    folder: str
    files: dict[uuid.UUID | None, tuple[str, str]]


def render_keys(event_id, photo_id, version: int, viewers: list[uuid.UUID | None], ext: str = "jpg") -> RenderKeys:
    """The keys of a new try's render of `version`, for the public file and each viewer's: in a folder of its
    own (a new token), each file (`ext`: jpg, webp for an animated image, mp4 for a video) beside its
    thumbnail, always a JPEG."""
    folder = f"{photo_prefix(event_id, photo_id)}v{version}.{secrets.token_hex(4)}/"
    bases = {viewer: folder + ("public" if viewer is None else f"user_{viewer}") for viewer in viewers}
    return RenderKeys(folder, {viewer: (f"{base}.{ext}", f"{base}_thumb.jpg") for viewer, base in bases.items()})


def derived_version(key: str) -> int | None:
    """The version of a key of a derived shape; None for any other key (an upload, a stranger's file)."""
    found = DERIVED_KEY.match(key)
    return int(found["version"]) if found else None
