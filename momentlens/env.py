"""Settings from environment variables, each checked where it is read: a bad value stops any command with one
line naming the variable (manage.py prints it), never a traceback from deep inside a library."""

import logging
import math
import os

from django.core.exceptions import ImproperlyConfigured


def text(name: str, default: str) -> str:
    return os.environ.get(name, default)


def integer(name: str, default: int, *, least: int | None = None, most: int | None = None) -> int:
    return _number(name, default, int, "a whole number", least, most)


def number(name: str, default: float, *, least: float | None = None, most: float | None = None) -> float:
    return _number(name, default, float, "a number", least, most)


def names(name: str, default: str) -> list[str]:
    """A comma-separated list, each name stripped; a stray comma or space names nothing (empty: the default)."""
    listed = [one.strip() for one in os.environ.get(name, "").split(",") if one.strip()]
    return listed or [one.strip() for one in default.split(",")]


def choice(name: str, default: str, choices) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: must be one of {', '.join(sorted(choices))}")
    return value


def log_level(name: str, default: str) -> str:
    value = os.environ.get(name, default).upper()
    if not isinstance(logging.getLevelName(value), int):
        raise ImproperlyConfigured(f"{name}={value!r}: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return value


def _number(name: str, default, kind, described: str, least, most):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: not {described}") from None
    # float() also reads "nan", "inf" and 1e400, which no wait or limit means.
    if kind is float and not math.isfinite(value):
        raise ImproperlyConfigured(f"{name}={raw!r}: not a finite number")
    if (least is not None and value < least) or (most is not None and value > most):
        bounds = f"at least {least}" if most is None else f"from {least} to {most}"
        raise ImproperlyConfigured(f"{name}={raw!r}: must be {bounds}")
    return value


def together(names: tuple[str, ...]) -> dict[str, str]:
    """Variables that mean something only all at once (a bucket's endpoint, name and key): all or none."""
    values = {name: os.environ.get(name, "") for name in names}
    missing = [name for name, value in values.items() if not value]
    if missing and len(missing) < len(names):
        raise ImproperlyConfigured(f"{', '.join(missing)} not set: {', '.join(names)} are set together or not at all")
    return values


def sentry_dsn(name: str) -> str:
    value = os.environ.get(name, "")
    if value:
        from sentry_sdk.utils import BadDsn, Dsn

        try:
            Dsn(value)
        except BadDsn as error:  # the value is a secret: only why it is wrong is said
            raise ImproperlyConfigured(f"{name}: not a Sentry DSN ({error})") from None
    return value
