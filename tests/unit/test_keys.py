"""Derived object keys (faces/rendering/keys.py): the only shapes the worker writes or deletes."""

import uuid

import pytest

from faces.rendering import keys

EVENT, PHOTO, USER = (uuid.UUID(int=n) for n in (1, 2, 3))


def test_every_key_the_worker_writes_is_a_derived_shape_with_its_version():
    written = [*keys.public_keys(EVENT, PHOTO, 3), *keys.user_keys(EVENT, PHOTO, 3, USER)]
    assert written == [
        f"events/{EVENT}/photos/{PHOTO}/v3/public.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v3/public_thumb.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v3/user_{USER}.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v3/user_{USER}_thumb.jpg",
    ]
    assert [keys.derived_version(key) for key in written] == [3, 3, 3, 3]


@pytest.mark.parametrize(
    "key",
    [
        f"events/{EVENT}/photos/{PHOTO}/original.jpg",  # an upload under the photo's prefix
        f"events/{EVENT}/uploads/{PHOTO}.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v0/public.jpg",  # version 0 is the upload itself
        f"events/{EVENT}/photos/{PHOTO}/v3/public.png",
        f"events/{EVENT}/photos/{PHOTO}/v3/user_nobody.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v3/public.jpg.bak",
        f"users/{USER}/references/selfie.jpg",
    ],
)
def test_no_other_key_is_derived(key):
    assert keys.derived_version(key) is None
