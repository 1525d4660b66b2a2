"""Decoding a queue message into a job (jobqueue/messages.py), without a database."""

import uuid

import pytest

from jobqueue import messages, registry
from jobqueue.errors import BadMessage, UnknownJob

PHOTO = "6f1c7e0e-0000-4000-8000-000000000001"


@pytest.fixture(autouse=True)
def unit_job():
    registry.register("unit_job", id_field="photo_id")(lambda payload, ctx: None)


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        (None, "empty"),
        ("{not json", "not JSON"),
        ("x" * (messages.MESSAGE_LIMITS.max_chars + 1), "limit"),
        ("[1, 2]", "not a JSON object but list"),
        ('"text"', "not a JSON object but str"),
        ("[" * 5000 + "]" * 5000, "not JSON"),
    ],
)
def test_what_is_not_a_json_object_is_a_bad_message(body, complaint):
    with pytest.raises(BadMessage, match=complaint):
        messages.decode(body)


def test_a_job_needs_a_known_name_and_a_uuid_id():
    with pytest.raises(BadMessage, match="no 'job' string"):
        messages.job_of({"photo_id": PHOTO})
    with pytest.raises(UnknownJob):
        messages.job_of({"job": "nope", "photo_id": PHOTO})
    with pytest.raises(BadMessage, match="photo_id must be a uuid"):
        messages.job_of({"job": "unit_job", "photo_id": "not-a-uuid"})
    with pytest.raises(BadMessage, match="photo_id must be a uuid"):
        messages.job_of({"job": "unit_job", "photo_id": 7})


def test_a_valid_message_names_its_job_and_target():
    job = messages.job_of(messages.decode(f'{{"job": "unit_job", "photo_id": "{PHOTO}", "extra": 1}}'))
    target = uuid.UUID(job.payload[job.type.id_field])
    assert (job.name, target, job.payload["extra"]) == ("unit_job", uuid.UUID(PHOTO), 1)


def test_a_message_is_logged_by_the_id_fields_jobs_register():
    ids = registry.ids_of({"job": "unit_job", "photo_id": PHOTO * 3, "note": "x"})
    assert ids == {"photo_id": (PHOTO * 3)[:64]}
    assert registry.ids_of(None) == {}
    assert registry.ids_of(["photo_id"]) == {}
