"""Turn DATABASE_URL (or its absence) into Django's DATABASES entry."""

from pathlib import Path

import psycopg
from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import conninfo_to_dict

# Both entries use the same backend so that tests can repoint a connection at a
# throwaway server without swapping the engine under a live wrapper.
ENGINE = "momentlens.db"

_DJANGO_KEYS = {"dbname": "NAME", "user": "USER", "password": "PASSWORD", "host": "HOST", "port": "PORT"}


def database_settings(url: str | None, embedded_pgdata: Path) -> dict:
    """DATABASES['default'] for a URL, or for the embedded server at embedded_pgdata."""
    if not url:
        return {"ENGINE": ENGINE, "NAME": "postgres", "USER": "postgres", "EMBEDDED_PGDATA": embedded_pgdata}
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:  # the message names the part that is wrong, never the password
        raise ImproperlyConfigured(f"DATABASE_URL is not a PostgreSQL URL: {error}") from None
    entry = {"ENGINE": ENGINE, "EMBEDDED_PGDATA": None, "OPTIONS": {}}
    for key, value in params.items():
        if key in _DJANGO_KEYS:
            entry[_DJANGO_KEYS[key]] = value
        else:
            entry["OPTIONS"][key] = value
    return entry
