"""Log fields travel in `extra`; the configured formatter writes them as one key=value line, and parse() reads
it back."""

import logging

from django.conf import settings

from jobqueue.logfmt import LogfmtFormatter
from tests.support.log_helpers import parse


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


def test_parse_reads_back_every_field_the_formatter_wrote():
    fields = {"msg_id": 7, "error": 'a "b"\nc \\d \\"e', "path": "C:\\x", "empty": "", "eq": "k=v", "ms": 12.5}
    line = LogfmtFormatter().format(record("job_done", **fields))
    parsed = parse(line)
    assert parsed == {
        "asctime": line[:23],
        "level": "INFO",
        "logger": "unit",
        "event": "job_done",
        **{key: str(value) for key, value in fields.items()},
    }


def test_parse_keeps_a_library_message_and_its_fields():
    line = LogfmtFormatter().format(record("Connection pool is full", host="db one"))
    assert parse(line) == {
        "asctime": line[:23],
        "level": "INFO",
        "logger": "unit",
        "message": "Connection pool is full",
        "host": "db one",
    }


def test_parse_reads_a_line_without_a_timestamp():
    assert parse("sweep_orphans deleted=3 busy=0") == {"message": "sweep_orphans", "deleted": "3", "busy": "0"}
