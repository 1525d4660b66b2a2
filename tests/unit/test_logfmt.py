"""Log fields travel in `extra`; the configured formatter writes them as one key=value line."""

import logging

from django.conf import settings

from jobqueue.logfmt import LogfmtFormatter


def record(message: str, **extra) -> logging.LogRecord:
    logger = logging.getLogger("unit")
    return logger.makeRecord("unit", logging.INFO, __file__, 1, message, (), None, extra=extra)


def test_an_event_and_its_fields_make_one_greppable_line():
    line = LogfmtFormatter().format(record("job_done", msg_id=7, outcome="completed", error='a "b"\nc', skipped=None))
    assert line.endswith('event=job_done msg_id=7 outcome=completed error="a \\"b\\"\\nc"')
    assert " level=INFO logger=unit " in line
    assert "\n" not in line


def test_a_library_message_is_kept_as_written():
    assert LogfmtFormatter().format(record("Connection pool is full")).endswith("logger=unit Connection pool is full")


def test_the_configured_handler_uses_it():
    formatter = settings.LOGGING["handlers"]["stderr"]["formatter"]
    assert settings.LOGGING["formatters"][formatter]["()"] == "jobqueue.logfmt.LogfmtFormatter"
