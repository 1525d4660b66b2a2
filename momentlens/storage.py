"""Object storage options: Cloudflare R2 (or any S3 server) via django-storages."""

from botocore.config import Config


def s3_storage_options(*, endpoint_url: str, bucket: str, access_key: str, secret_key: str) -> dict:
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
        # With a client_config, django-storages ignores its own signature and
        # addressing options, so they live here.
        "client_config": Config(
            signature_version="s3v4",
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 3, "mode": "standard"},
        ),
    }
