"""The worker's log lines: one per event, key=value, greppable at 2am, and no credential in any of them.

Code logs an event name and its fields in `extra`:
    log.info("job_done", extra={"msg_id": 7, "outcome": "completed"})
and LogfmtFormatter (configured in settings.LOGGING) writes
    2026-11-30 12:00:00,000 level=INFO logger=jobqueue.worker event=job_done msg_id=7 outcome=completed
A message that is not one word (a library's) is written as it is, fields after it.
The tests read such a line back into its fields (tests.support.log_helpers.parse).

Before the formatter, the handler's RedactSecrets filter masks the credentials configured for this process (the
database password, the R2 secret) in the message, its fields and its traceback; Sentry's events get the same
(`scrub_event`), and so does the archive's error text (`redact`).
"""

import logging
import os
from urllib.parse import quote, quote_plus, urlsplit

from django.conf import settings
from psycopg.conninfo import conninfo_to_dict

LINE_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
# What every LogRecord carries; anything else on a record came in `extra`.
RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
# What a credential becomes in a line.
MASK = "[redacted]"


def kv(event: str, **fields) -> str:
    return " ".join([f"event={event}", *pairs(fields)])


def pairs(fields: dict) -> list[str]:
    return [f"{key}={quoted(value)}" for key, value in fields.items() if value is not None]


def quoted(value) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def fields_of(record: logging.LogRecord) -> dict:
    return {key: value for key, value in vars(record).items() if key not in RECORD_ATTRIBUTES}


class LogfmtFormatter(logging.Formatter):
    def __init__(self, fmt: str = LINE_FORMAT, **kwargs):
        super().__init__(fmt, **kwargs)

    def formatMessage(self, record: logging.LogRecord) -> str:
        message = record.message
        fields = fields_of(record)
        if message.isidentifier():
            record.message = kv(message, **fields)
        elif fields:
            record.message = " ".join([message, *pairs(fields)])
        return super().formatMessage(record)


# -- no credential in a line ------------------------------------------------


def secrets() -> list[str]:
    """The credential values configured for this process, in every spelling a line may show, longest first."""
    values = [settings.DATABASES["default"].get("PASSWORD"), settings.R2_SECRET_ACCESS_KEY]
    url = settings.DATABASE_URL_RAW
    if url:
        values.append(conninfo_to_dict(url).get("password"))
    return _longest_first(values)


def environment_secrets() -> list[str]:
    """The same, read from the environment: for the one line a process whose settings did not load prints."""
    try:
        password = urlsplit(os.environ.get("DATABASE_URL", "")).password
    except ValueError:
        password = None
    return _longest_first([password, os.environ.get("R2_SECRET_ACCESS_KEY"), os.environ.get("SENTRY_DSN")])


def _longest_first(values) -> list[str]:
    spellings = {form for value in values if value and len(value) >= 4 for form in _spellings(value)}
    return sorted(spellings, key=len, reverse=True)


def _spellings(secret: str) -> set[str]:
    """As given, as a URL carries it, and as quoted() escapes it inside quotes."""
    escaped = secret.replace("\\", "\\\\").replace('"', '\\"')
    return {secret, quote(secret, safe=""), quote_plus(secret), escaped}


def redact(text: str, known: list[str] | None = None) -> str:
    """`known`: secrets() already worked out, for a caller that masks many strings at once."""
    for secret in secrets() if known is None else known:
        text = text.replace(secret, MASK)
    return text


class RedactSecrets(logging.Filter):
    """A handler filter: formats the record's message once, then masks any credential in it and in
    the fields that came in `extra` (an error's text may carry a connection string)."""

    def filter(self, record: logging.LogRecord) -> bool:
        known = secrets()
        message = record.getMessage()
        cleaned = redact(message, known)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        for key, value in vars(record).items():
            if key not in RECORD_ATTRIBUTES and isinstance(value, str):
                setattr(record, key, redact(value, known))
        if record.exc_info and record.exc_info[1] is not None:
            text = redact(logging.Formatter().formatException(record.exc_info), known)
            record.exc_info, record.exc_text = None, text
        return True


def scrub_event(event: dict, hint: dict) -> dict:
    """Sentry before_send: mask credentials anywhere in the event."""
    return _scrub(event, secrets())


def _scrub(value, known: list[str]):
    if isinstance(value, str):
        return redact(value, known)
    if isinstance(value, dict):
        return {key: _scrub(item, known) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item, known) for item in value]
    return value
