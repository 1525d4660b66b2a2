"""Reading uploads from object storage with outcomes the consumer understands."""

import botocore.exceptions
from django.conf import settings
from django.core.files.storage import default_storage

from faces.media.limits import MediaTooLarge
from jobqueue.api import MissingObject

_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}


def read_object(key: str) -> bytes:
    """The object's bytes; MissingObject (archived at once) when it is not there, MediaTooLarge when it
    is larger than MEDIA_MAX_UPLOAD_BYTES (faces/media/limits.py; never more than that is read into memory).

    Any other storage error propagates: an outage is retried by the consumer.
    """
    limit = settings.MEDIA_MAX_UPLOAD_BYTES
    try:
        with default_storage.open(key, "rb") as handle:
            data = handle.read(limit + 1)
    except FileNotFoundError:
        raise MissingObject(f"no object at {key}") from None
    except botocore.exceptions.ClientError as error:
        if str(error.response.get("Error", {}).get("Code")) in _MISSING_CODES:
            raise MissingObject(f"no object at {key}") from None
        raise
    if len(data) > limit:
        raise MediaTooLarge(f"{key} is larger than MEDIA_MAX_UPLOAD_BYTES ({limit} bytes)")
    return data
