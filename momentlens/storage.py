"""Object storage options: Cloudflare R2 (or any S3 server) via django-storages."""

from dataclasses import dataclass

from botocore.config import Config


@dataclass(frozen=True)
class StorageTimeouts:
    """How long one call to storage may take. A storage that hangs (it takes connections and answers nothing) is an
    outage, and while a call waits on it the reader reads nothing, not even privacy work: botocore's defaults (60 s
    each way), with the four attempts `max_attempts: 3` meant, let one call wait minutes. A PUT also waits up to a
    second for `100 Continue` before its body (tests/test_storage_outage.py)."""

    connect_s: float = 5.0  # R2 takes a connection in well under a second
    read_s: float = 10.0  # one socket read or send stalled this long: R2 answers a PUT in a second or two
    attempts: int = 2  # botocore's own, the first included; an upload is retried again between checkpoints (Uploads)


STORAGE_TIMEOUTS = StorageTimeouts()
# The outage probe's (faces.publication.probe_storage): between two probes the reader reads privacy work, so a probe
# of a storage that hangs gives up in seconds.
PROBE_TIMEOUTS = StorageTimeouts(connect_s=2.0, read_s=3.0, attempts=1)


def s3_storage_options(
    *, endpoint_url: str, bucket: str, access_key: str, secret_key: str, timeouts: StorageTimeouts = STORAGE_TIMEOUTS
) -> dict:
    """OPTIONS for storages.backends.s3.S3Storage that R2 accepts.

    R2 rejects the CRC checksums newer botocore sends by default, so checksums
    are computed and validated only where an operation requires them.
    """
    return {
        "endpoint_url": endpoint_url,
        "bucket_name": bucket,
        "access_key": access_key,
        "secret_key": secret_key,
        "region_name": "auto",
        # The worker builds versioned keys itself; a retry may rewrite one that
        # no row points at yet, so the storage must not invent another name.
        "file_overwrite": True,
        "default_acl": None,
        "querystring_auth": False,
        "client_config": client_config(timeouts),
    }


def client_config(timeouts: StorageTimeouts) -> Config:
    # With a client_config, django-storages ignores its own signature and
    # addressing options, so they live here.
    return Config(
        signature_version="s3v4",
        s3={"addressing_style": "path"},
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        connect_timeout=timeouts.connect_s,
        read_timeout=timeouts.read_s,
        retries={"total_max_attempts": timeouts.attempts, "mode": "standard"},
    )
