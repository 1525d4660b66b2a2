from pathlib import Path

from momentlens.database_url import ENGINE, database_settings


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
    assert entry["OPTIONS"] == {"sslmode": "require"}
    assert entry["EMBEDDED_PGDATA"] is None


def test_no_url_means_the_embedded_server():
    entry = database_settings(None, Path("/srv/var/postgres"))
    assert entry["EMBEDDED_PGDATA"] == Path("/srv/var/postgres")
