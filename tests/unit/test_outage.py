"""Where an outage ends and a job's own failure begins (docs/ARCHITECTURE.md §9, "Outages")."""

import botocore.exceptions
import pytest

from faces.publication import storage_down
from jobqueue.outage import dependency_down


def client_error(code: str, status: int) -> botocore.exceptions.ClientError:
    return botocore.exceptions.ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
    )


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (botocore.exceptions.EndpointConnectionError(endpoint_url="http://r2"), True),
        (botocore.exceptions.ConnectTimeoutError(endpoint_url="http://r2"), True),
        (botocore.exceptions.ReadTimeoutError(endpoint_url="http://r2"), True),
        (botocore.exceptions.ConnectionClosedError(endpoint_url="http://r2"), True),
        (client_error("ServiceUnavailable", 503), True),
        (client_error("InternalError", 500), True),
        (client_error("SlowDown", 503), True),
        (client_error("NoSuchKey", 404), False),
        (client_error("AccessDenied", 403), False),
        (ValueError("undecodable"), False),
    ],
)
def test_storage_is_down_for_connection_failures_and_5xx_and_never_for_the_requests_own_fault(error, outage):
    assert storage_down(error) is outage


def test_the_faces_app_registers_storage_and_an_outage_is_found_behind_what_it_caused():
    wrapped = RuntimeError("upload failed")
    wrapped.__cause__ = botocore.exceptions.EndpointConnectionError(endpoint_url="http://r2")
    assert dependency_down(wrapped).name == "storage"
    assert dependency_down(RuntimeError("a bug")) is None


def test_a_wait_begins_once_per_outage_probes_with_backoff_and_ends_when_the_probe_answers(monkeypatch):
    from jobqueue import outage, reporting
    from jobqueue.health import WorkerState

    reported, names, down = [], [], [True]

    def probe():
        if down[0]:
            raise ConnectionError("refused")

    monkeypatch.setattr(reporting, "report_outage", lambda error, **kw: reported.append(kw["dependency"]))
    state = WorkerState(phase="running", lock_held=True)
    wait = outage.OutageWait(state, names.append)
    storage = outage.Dependency("storage", lambda error: True, probe)

    assert wait.over(), "no outage: nothing to wait for"
    wait.begin(storage, ConnectionError("refused"), {"msg_id": 1})
    wait.begin(storage, ConnectionError("refused"), {"msg_id": 2})
    assert reported == ["storage"], "one report per outage, however many tries meet it"
    assert state.snapshot()["status"] == "waiting_for_storage"
    assert not state.healthy
    assert not wait.over(), "the first probe is not due yet"
    monkeypatch.setattr(wait, "_next_probe", 0.0)
    assert not wait.over(), "due, and storage still down"
    assert wait.probe_in_s > 0, "a failed probe puts the next one off"
    down[0] = False
    monkeypatch.setattr(wait, "_next_probe", 0.0)
    assert wait.over()
    assert state.healthy
    assert names[0].startswith("storage since=")
    assert names[1:] == [None]
