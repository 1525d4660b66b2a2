"""Keep credentials out of log lines and Sentry events."""

import logging
import os
from urllib.parse import quote, quote_plus, urlsplit

from django.conf import settings
from psycopg.conninfo import conninfo_to_dict

from jobqueue.logfmt import RECORD_ATTRIBUTES

MASK = "[redacted]"


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
    """As given, as a URL carries it, and as jobqueue.logfmt.quoted escapes it inside quotes."""
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
