"""Captured log records as the configured handler writes them (jobqueue/logfmt.py), and such a line read back."""

import re

from jobqueue.logfmt import LogfmtFormatter

FORMATTER = LogfmtFormatter()
# logging's default asctime, which jobqueue.logfmt.LINE_FORMAT starts with.
ASCTIME = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
# A key=value pair (the value quoted as jobqueue.logfmt.quoted quotes it, or one word), else a loose word of a
# free message.
TOKEN = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)|(\S+)')
ESCAPED = re.compile(r"\\(.)")


def lines(caplog, event: str | None = None) -> list[str]:
    """caplog's records as logfmt lines; with `event`, only that event's."""
    formatted = [FORMATTER.format(record) for record in caplog.records]
    return [line for line in formatted if event is None or parse(line).get("event") == event]


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
    """The inverse of jobqueue.logfmt.quoted."""
    if not value.startswith('"'):
        return value
    return ESCAPED.sub(lambda escape: "\n" if escape[1] == "n" else escape[1], value[1:-1])
