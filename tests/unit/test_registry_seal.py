"""The registries are filled when the apps load and read-only while a worker runs (jobqueue/registry.py)."""

import threading

import pytest

from jobqueue import registry


@pytest.fixture(autouse=True)
def own_registries(monkeypatch):
    for name in ("_jobs", "_archive_hooks", "_periodic", "_health_fields", "_startup"):
        monkeypatch.setattr(registry, name, {})
    monkeypatch.setattr(registry, "_id_fields", [])


REGISTRATIONS = {
    "job": lambda: registry.register("late_job", id_field="photo_id")(lambda payload, ctx: None),
    "archive hook": lambda: registry.register_archive_hook("late_rows", lambda payload: 0),
    "periodic task": lambda: registry.register_periodic("late_task", lambda: None, every_s=lambda: 1.0),
    "health field": lambda: registry.register_health_field("late_field", lambda: 1),
    "startup work": lambda: registry.register_startup("late_work", lambda: None),
}


@pytest.mark.parametrize("kind", REGISTRATIONS)
def test_nothing_is_registered_while_a_worker_runs(kind):
    with registry.sealed():
        with pytest.raises(registry.RegistrySealed, match=f"{kind} late_.* registered while a worker runs"):
            REGISTRATIONS[kind]()
    assert not any(vars(registry)[name] for name in ("_jobs", "_archive_hooks", "_periodic", "_health_fields"))
    REGISTRATIONS[kind]()  # the loop has ended: open again


def test_the_seal_holds_until_the_last_of_two_loops_ends():
    first_inside, release = threading.Event(), threading.Event()

    def loop():
        with registry.sealed():
            first_inside.set()
            release.wait(5)

    thread = threading.Thread(target=loop)
    thread.start()
    first_inside.wait(5)
    with registry.sealed():
        pass
    with pytest.raises(registry.RegistrySealed):
        REGISTRATIONS["job"]()
    release.set()
    thread.join(5)
    REGISTRATIONS["job"]()
    assert registry.lookup("late_job") is not None
