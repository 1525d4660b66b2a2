"""Captured log records as the configured handler writes them (jobqueue/logfmt.py)."""

from jobqueue.logfmt import LogfmtFormatter, parse

FORMATTER = LogfmtFormatter()


def lines(caplog, event: str | None = None) -> list[str]:
    """caplog's records as logfmt lines; with `event`, only that event's."""
    formatted = [FORMATTER.format(record) for record in caplog.records]
    return [line for line in formatted if event is None or parse(line).get("event") == event]
