"""Derived object keys (SPEC §3). Only the worker builds these, always versioned."""


def photo_prefix(event_id, photo_id) -> str:
    return f"events/{event_id}/photos/{photo_id}/"


def public_keys(event_id, photo_id, version: int) -> tuple[str, str]:
    base = f"{photo_prefix(event_id, photo_id)}v{version}/public"
    return f"{base}.jpg", f"{base}_thumb.jpg"


def user_keys(event_id, photo_id, version: int, user_id) -> tuple[str, str]:
    base = f"{photo_prefix(event_id, photo_id)}v{version}/user_{user_id}"
    return f"{base}.jpg", f"{base}_thumb.jpg"
