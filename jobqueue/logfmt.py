"""One log line per event, key=value, greppable at 2am.

Code logs an event name and its fields in `extra`:
    log.info("job_done", extra={"msg_id": 7, "outcome": "completed"})
and LogfmtFormatter (configured in settings.LOGGING) writes
    2026-11-30 12:00:00,000 level=INFO logger=jobqueue.worker event=job_done msg_id=7 outcome=completed
A message that is not one word (a library's) is written as it is, fields after it.
"""

import logging

LINE_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
# What every LogRecord carries; anything else on a record came in `extra`.
RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


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
