"""One log line per event, key=value, greppable at 2am.

Code logs an event name and its fields in `extra`:
    log.info("job_done", extra={"msg_id": 7, "outcome": "completed"})
and LogfmtFormatter (configured in settings.LOGGING) writes
    2026-11-30 12:00:00,000 level=INFO logger=jobqueue.worker event=job_done msg_id=7 outcome=completed
A message that is not one word (a library's) is written as it is, fields after it.
parse() reads such a line back into its fields.
"""

import logging
import re

LINE_FORMAT = "%(asctime)s level=%(levelname)s logger=%(name)s %(message)s"
# What every LogRecord carries; anything else on a record came in `extra`.
RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
# logging's default asctime, which LINE_FORMAT starts with.
ASCTIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
# A key=value pair (the value quoted as quoted() quotes it, or one word), else a loose word of a free message.
TOKEN = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)|(\S+)')
ESCAPED = re.compile(r"\\(.)")


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


def parse(line: str) -> dict[str, str]:
    """A line LogfmtFormatter wrote, back into its fields (every value a string): `asctime`, `level`, `logger`,
    `event` and the rest; the words of a message that is not one word, joined, as `message`."""
    fields = {}
    stamp = ASCTIME.match(line)
    if stamp:
        fields["asctime"] = stamp[1]
    words = []
    for key, value, word in TOKEN.findall(line, stamp.end() if stamp else 0):
        if word:
            words.append(word)
        else:
            fields[key] = unquoted(value)
    if words:
        fields["message"] = " ".join(words)
    return fields


def unquoted(value: str) -> str:
    """The inverse of quoted()."""
    if not value.startswith('"'):
        return value
    return ESCAPED.sub(lambda escape: "\n" if escape[1] == "n" else escape[1], value[1:-1])
