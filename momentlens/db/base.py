from django.db.backends.postgresql import base


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
            from momentlens.devservices.postgres import EmbeddedPostgres

            params["host"] = str(EmbeddedPostgres(pgdata).ensure_ready().socket_dir)
        return params
