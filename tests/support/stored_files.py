"""A photo's files as its row names them, and the objects in storage behind them (Django's default storage)."""

import re
import uuid

from django.core.files.storage import default_storage


def photo_files(photo) -> list[tuple[uuid.UUID | None, str, str]]:
    """(viewer, file key, thumbnail key) of the photo's public file (viewer None), then each member's own file."""
    own = [(variant.user_id, variant.key, variant.thumb_key) for variant in photo.variants.all()]
    return [(None, photo.public_key, photo.public_thumb_key), *own]


def assert_every_row_key_exists(photo) -> None:
    for _, key, thumb in photo_files(photo):
        for named in (key, thumb):
            if named:
                assert default_storage.exists(named), f"a row points at a missing object: {named}"


def try_folder_files(photo) -> list[str]:
    """The objects in the folder of the try whose keys the photo row names (`…/v1.{token}/`)."""
    folder = photo.public_key.rsplit("/", 1)[0]
    assert untokened(folder + "/") != folder + "/", f"{photo.public_key} is not a derived key"
    return sorted(default_storage.listdir(folder + "/")[1])


def untokened(key: str) -> str:
    """A derived key without its try's token (faces/rendering/files.py): `…/v1/public.jpg`, as tests name keys."""
    return re.sub(r"/v(\d+)\.[0-9a-f]{8}/", r"/v\1/", key)


def read_bytes(key: str) -> bytes:
    with default_storage.open(key, "rb") as handle:
        return handle.read()
