from pathlib import Path

from momentlens.database_url import CONNECTION_DEFAULTS, ENGINE, database_settings


def test_url_becomes_django_settings():
    entry = database_settings(
        "postgresql://worker:s3cret@db.example.test:5432/momentlens?sslmode=require", Path("/unused")
    )
    assert entry["ENGINE"] == ENGINE
    assert (entry["USER"], entry["PASSWORD"], entry["HOST"], entry["PORT"], entry["NAME"]) == (
        "worker",
        "s3cret",
        "db.example.test",
        "5432",
        "momentlens",
    )
    assert entry["OPTIONS"] == {**CONNECTION_DEFAULTS, "sslmode": "require"}
    assert entry["EMBEDDED_PGDATA"] is None


def test_a_url_bounds_every_wait_on_the_network_unless_it_says_otherwise():
    """A server that accepts and never answers, or a host gone mid-query, must end in an error, not a wait without
    end (tests/test_worker_process.py: the worker then exits past WORKER_DB_RECOVERY_S)."""
    bounded = database_settings("postgresql://worker@db.example.test/momentlens", Path("/unused"))["OPTIONS"]
    assert int(bounded["connect_timeout"]) > 0
    assert bounded["keepalives"] == "1"
    assert int(bounded["tcp_user_timeout"]) > 0
    url = "postgresql://worker@db.example.test/momentlens?connect_timeout=3&keepalives_idle=5"
    own = database_settings(url, Path("/unused"))["OPTIONS"]
    assert (own["connect_timeout"], own["keepalives_idle"]) == ("3", "5")


def test_no_url_means_the_embedded_server():
    entry = database_settings(None, Path("/srv/var/postgres"))
    assert entry["EMBEDDED_PGDATA"] == Path("/srv/var/postgres")
