"""Reading uploads from object storage with outcomes the consumer understands, and telling its outages apart."""

import botocore.exceptions
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from faces.media.limits import MediaTooLarge
from jobqueue.api import MissingObject

_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
# Codes by which S3 says the service, not the request, is at fault (an answer with a 5xx status is too).
_SERVICE_CODES = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout", "RequestTimeTooSkewed"}
# Where worker_check's storage check and the outage probe write their small objects: no row names them.
PROBE_PREFIX = "_worker_check/"


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


def storage_down(error: BaseException) -> bool:
    """Whether `error` says storage cannot be reached or failed on its side: an outage (jobqueue/outage.py), not
    the job's failure. A refused or reset connection, a timeout, a 5xx answer; not a 4xx (a missing object, a
    denied key: the request's own fault, which no wait mends)."""
    # Refused and timed-out connections (ConnectionError), and a connection lost while reading (HTTPClientError).
    if isinstance(error, botocore.exceptions.ConnectionError | botocore.exceptions.HTTPClientError):
        return True
    if isinstance(error, botocore.exceptions.ClientError):
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return status >= 500 or str(error.response.get("Error", {}).get("Code")) in _SERVICE_CODES
    return False


def round_trip(key: str, payload: bytes) -> bytes:
    """Write `payload` at `key`, read it back, delete it: what was read back. Raises what storage raises."""
    saved = default_storage.save(key, ContentFile(payload))
    with default_storage.open(saved, "rb") as handle:
        read_back = handle.read()
    default_storage.delete(saved)
    return read_back


def probe_storage() -> None:
    """Raises while storage is down: one small object written, read and deleted, since a storage that answers
    reads while its writes fail (a partial outage) would otherwise end the wait for a try that fails again."""
    round_trip(f"{PROBE_PREFIX}outage-probe.txt", b"outage probe")
