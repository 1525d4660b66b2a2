"""Parse a queue message into a job, or say why it cannot be one."""

import json
import uuid
from dataclasses import dataclass

from jobqueue import registry
from jobqueue.errors import BadMessage, UnknownJob


@dataclass(frozen=True)
class MessageLimits:
    # A message is a small JSON object ({"job": ..., "photo_id": ...}); anything far larger is not one of ours.
    max_chars: int = 16_384


MESSAGE_LIMITS = MessageLimits()


@dataclass(frozen=True)
class Job:
    type: registry.JobType
    payload: dict

    @property
    def name(self) -> str:
        return self.type.name


def decode(body: str | None, limits: MessageLimits = MESSAGE_LIMITS) -> dict:
    """The message's JSON object, or BadMessage."""
    if not isinstance(body, str):
        raise BadMessage("the message is empty (SQL NULL)")
    if len(body) > limits.max_chars:
        raise BadMessage(f"message is {len(body)} characters, limit {limits.max_chars}")
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as error:  # RecursionError: nesting deeper than the parser allows
        raise BadMessage(f"not JSON: {type(error).__name__}: {str(error)[:200]}") from None
    if not isinstance(payload, dict):
        raise BadMessage(f"not a JSON object but {type(payload).__name__}")
    return payload


def job_of(payload: dict) -> Job:
    """The registered job a decoded message asks for, with its target id checked."""
    name = payload.get("job")
    if not isinstance(name, str):
        raise BadMessage("no 'job' string")
    job_type = registry.lookup(name)
    if job_type is None:
        raise UnknownJob(f"unknown job {name[:64]!r}")
    target = payload.get(job_type.id_field)
    if not isinstance(target, str) or not is_uuid(target):
        raise BadMessage(f"{job_type.id_field} must be a uuid string")
    return Job(job_type, payload)


def is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
