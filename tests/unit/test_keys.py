"""Derived object keys (faces/rendering/files.py): the only shapes the worker writes or deletes."""

import uuid

import pytest

from faces.rendering import files

EVENT, PHOTO, USER = (uuid.UUID(int=n) for n in (1, 2, 3))


def test_every_key_the_worker_writes_is_a_derived_shape_with_its_version():
    render = files.render_keys(EVENT, PHOTO, 3, [None, USER])
    token = render.folder.rstrip("/").rpartition(".")[2]
    assert render.folder == f"events/{EVENT}/photos/{PHOTO}/v3.{token}/"
    written = [*render.files[None], *render.files[USER]]
    assert written == [
        f"{render.folder}public.jpg",
        f"{render.folder}public_thumb.jpg",
        f"{render.folder}user_{USER}.jpg",
        f"{render.folder}user_{USER}_thumb.jpg",
    ]
    assert [files.derived_version(key) for key in written] == [3, 3, 3, 3]
    assert files.render_keys(EVENT, PHOTO, 3, [None], "mp4").files[None][0].endswith("/public.mp4")


def test_two_tries_of_one_version_never_write_the_same_key():
    """A try cut off from its session may still upload while the retry commits the same version: each
    writes its own folder, so nothing a committed row names is ever replaced."""
    first, second = (files.render_keys(EVENT, PHOTO, 3, [None]) for _ in range(2))
    assert first.folder != second.folder
    assert first.files[None][0] != second.files[None][0]


def test_keys_written_before_the_try_token_are_still_derived():
    assert files.derived_version(f"events/{EVENT}/photos/{PHOTO}/v3/public.jpg") == 3


@pytest.mark.parametrize(
    "key",
    [
        f"events/{EVENT}/photos/{PHOTO}/original.jpg",  # an upload under the photo's prefix
        f"events/{EVENT}/uploads/{PHOTO}.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v0/public.jpg",  # version 0 is the upload itself
        f"events/{EVENT}/photos/{PHOTO}/v3/public.png",
        f"events/{EVENT}/photos/{PHOTO}/v3/user_nobody.jpg",
        f"events/{EVENT}/photos/{PHOTO}/v3/public.jpg.bak",
        f"events/{EVENT}/photos/{PHOTO}/v3.XYZ/public.jpg",  # not a try's token
        f"users/{USER}/references/selfie.jpg",
    ],
)
def test_no_other_key_is_derived(key):
    assert files.derived_version(key) is None
