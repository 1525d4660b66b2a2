"""Rewriting a key keeps the key on both backends, and the S3 server is a real one, credentials required."""

import botocore.exceptions
import pytest
from django.core.files.base import ContentFile

KEY = "events/e1/photos/p1/v1/public.jpg"


def test_saving_an_existing_key_keeps_the_exact_key(storage):
    """The worker builds its keys; a retry may rewrite one and must not get a renamed copy."""
    storage.save(KEY, ContentFile(b"first"))
    assert storage.save(KEY, ContentFile(b"second")) == KEY
    with storage.open(KEY, "rb") as handle:
        assert handle.read() == b"second"
    storage.delete(KEY)


def test_bytes_written_through_storage_are_in_seaweedfs(seaweed):
    from storages.backends.s3 import S3Storage

    storage = S3Storage(**seaweed.storage_options())
    storage.save("probe/direct.bin", ContentFile(b"read me back"))
    body = seaweed.client().get_object(Bucket=seaweed.bucket, Key="probe/direct.bin")["Body"].read()
    assert body == b"read me back"


def test_a_wrong_secret_is_refused(seaweed):
    seaweed.client().put_object(Bucket=seaweed.bucket, Key="probe/secret.bin", Body=b"x")
    intruder = seaweed.client(secret_key="not-the-secret")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        intruder.get_object(Bucket=seaweed.bucket, Key="probe/secret.bin")
    assert refused.value.response["Error"]["Code"] in {"SignatureDoesNotMatch", "AccessDenied"}
