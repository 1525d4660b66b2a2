"""Derived object keys (docs/ARCHITECTURE.md §3). Only the worker builds these, always versioned."""

import re

UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Every shape the worker writes, and so the only shapes it may ever delete.
DERIVED_KEY = re.compile(
    rf"^events/(?P<event>{UUID})/photos/(?P<photo>{UUID})/v(?P<version>[1-9][0-9]*)/"
    rf"(?:public|user_{UUID})(?:_thumb)?\.(?:jpg|webp|mp4)$"
)


def photo_prefix(event_id, photo_id) -> str:
    return f"events/{event_id}/photos/{photo_id}/"


def public_keys(event_id, photo_id, version: int, ext: str = "jpg") -> tuple[str, str]:
    """The file (`ext`: jpg, webp for an animated image, mp4 for a video) and its thumbnail, always a JPEG."""
    base = f"{photo_prefix(event_id, photo_id)}v{version}/public"
    return f"{base}.{ext}", f"{base}_thumb.jpg"


def user_keys(event_id, photo_id, version: int, user_id, ext: str = "jpg") -> tuple[str, str]:
    base = f"{photo_prefix(event_id, photo_id)}v{version}/user_{user_id}"
    return f"{base}.{ext}", f"{base}_thumb.jpg"


def derived_version(key: str) -> int | None:
    """The version of a key of a derived shape; None for any other key (an upload, a stranger's file)."""
    found = DERIVED_KEY.match(key)
    return int(found["version"]) if found else None
