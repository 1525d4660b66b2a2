"""Turn DATABASE_URL (or its absence) into Django's DATABASES entry."""

from pathlib import Path

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import conninfo_to_dict

# Both entries use the same backend so that tests can repoint a connection at a
# throwaway server without swapping the engine under a live wrapper.
ENGINE = "momentlens.db"

_DJANGO_KEYS = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}

# libpq's own defaults wait without end: a connection to a server (or pooler) that accepts and never answers, and a
# query on a connection whose host is gone, hang until the kernel gives up (minutes) or for ever, where the worker must
# say the database is unreachable, wait it out and exit past WORKER_DB_RECOVERY_S. A URL's own values win.
CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",  # ms: sent data unacknowledged this long ends the connection
}


def database_settings(url: str | None, embedded_pgdata: Path) -> dict:
    """DATABASES['default'] for a URL, or for the embedded server at embedded_pgdata."""
    if not url:
        return {"ENGINE": ENGINE, "NAME": "postgres", "USER": "postgres", "EMBEDDED_PGDATA": embedded_pgdata}
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:  # the message names the part that is wrong, never the password
        raise ImproperlyConfigured(f"DATABASE_URL is not a PostgreSQL URL: {error}") from None
    entry = {"ENGINE": ENGINE, "EMBEDDED_PGDATA": None, "OPTIONS": dict(CONNECTION_DEFAULTS)}
    for key, value in params.items():
        if key in _DJANGO_KEYS:
            entry[_DJANGO_KEYS[key]] = value
        else:
            entry["OPTIONS"][key] = value
    return entry
