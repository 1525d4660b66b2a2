"""Derived object keys (docs/ARCHITECTURE.md §3). Only the worker builds these, always versioned.

A render's folder is `v{version}.{try}`: the version its rows will commit, and a token of the try that
writes it. Two tries of one version (a try cut off from its session, still uploading, and the retry that
commits) never write the same key, so no try ever replaces an object a committed row names. Keys written
before the token (`v{version}/`) are still derived keys: read, swept, never written again.
"""

import re
import secrets

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Every shape the worker writes, and so the only shapes it may ever delete.
DERIVED_KEY = re.compile(
    rf"^events/(?P<event>{UUID})/photos/(?P<photo>{UUID})/v(?P<version>[1-9][0-9]*)(?:\.[0-9a-f]{{8}})?/"
    rf"(?:public|user_{UUID})(?:_thumb)?\.(?:jpg|webp|mp4)$"
)


def photo_prefix(event_id, photo_id) -> str:
    return f"events/{event_id}/photos/{photo_id}/"


def try_token() -> str:
    """A render's own part of its folder's name: 8 hex digits, new for every try."""
    return secrets.token_hex(4)


def render_folder(event_id, photo_id, version: int, token: str) -> str:
    """The folder one try's render writes its files in."""
    return f"{photo_prefix(event_id, photo_id)}v{version}.{token}/"


def public_keys(event_id, photo_id, version: int, token: str, ext: str = "jpg") -> tuple[str, str]:
    """The file (`ext`: jpg, webp for an animated image, mp4 for a video) and its thumbnail, always a JPEG."""
    base = f"{render_folder(event_id, photo_id, version, token)}public"
    return f"{base}.{ext}", f"{base}_thumb.jpg"


def user_keys(event_id, photo_id, version: int, token: str, user_id, ext: str = "jpg") -> tuple[str, str]:
    base = f"{render_folder(event_id, photo_id, version, token)}user_{user_id}"
    return f"{base}.{ext}", f"{base}_thumb.jpg"


def derived_version(key: str) -> int | None:
    """The version of a key of a derived shape; None for any other key (an upload, a stranger's file)."""
    found = DERIVED_KEY.match(key)
    return int(found["version"]) if found else None
