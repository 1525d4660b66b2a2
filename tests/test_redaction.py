"""Credentials never reach a log line or a Sentry event."""

import logging

from django.test import override_settings

from jobqueue.logfmt import MASK, LogfmtFormatter, RedactSecrets, scrub_event

URL = "postgresql://worker:db-password-1234@db.example.test:5432/momentlens"


def make_record(message: str, *args) -> logging.LogRecord:
    return logging.LogRecord("t", logging.ERROR, __file__, 1, message, args, None)


@override_settings(DATABASE_URL_RAW=URL, R2_SECRET_ACCESS_KEY="r2-secret-abcdef")
def test_log_records_are_masked():
    record = make_record("event=db_lost error=%s", f"could not connect with {URL} and r2-secret-abcdef")
    assert RedactSecrets().filter(record)
    text = record.getMessage()
    assert "db-password-1234" not in text
    assert "r2-secret-abcdef" not in text
    assert MASK in text


@override_settings(DATABASE_URL_RAW=URL, R2_SECRET_ACCESS_KEY="r2-secret-abcdef")
def test_fields_in_extra_are_masked():
    record = logging.getLogger("t").makeRecord(
        "t", logging.ERROR, __file__, 1, "db_lost", (), None, extra={"error": f"cannot reach {URL}", "try": 2}
    )
    assert RedactSecrets().filter(record)
    line = LogfmtFormatter().format(record)
    assert "db-password-1234" not in line
    assert f'error="cannot reach postgresql://worker:{MASK}@db.example.test' in line
    assert "try=2" in line


@override_settings(DATABASE_URL_RAW=URL, R2_SECRET_ACCESS_KEY="r2-secret-abcdef")
def test_exception_text_is_masked():
    try:
        raise RuntimeError("boom db-password-1234")
    except RuntimeError:
        import sys

        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    RedactSecrets().filter(record)
    assert "db-password-1234" not in logging.Formatter().format(record)


@override_settings(DATABASE_URL_RAW=URL, R2_SECRET_ACCESS_KEY="r2-secret-abcdef")
def test_sentry_events_are_scrubbed_everywhere():
    event = {
        "message": "r2-secret-abcdef leaked",
        "contexts": {"job": {"dsn": URL}},
        "breadcrumbs": {"values": [{"message": "db-password-1234"}]},
    }
    scrubbed = scrub_event(event, {})
    assert "db-password-1234" not in str(scrubbed)
    assert "r2-secret-abcdef" not in str(scrubbed)
