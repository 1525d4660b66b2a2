"""The deploy files are valid: systemd accepts the unit, nginx accepts the /health location."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"


def test_systemd_accepts_the_unit(tmp_path):
    """`systemd-analyze verify`, with the install paths pointed at this checkout (they do not exist here)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    env_file = tmp_path / "worker.env"
    env_file.write_text("DATABASE_URL=postgresql://unused\n")
    unit = (DEPLOY / "momentlens-worker.service").read_text()
    unit = unit.replace("/srv/momentlens/worker/.venv/bin/python", sys.executable)
    unit = unit.replace("/srv/momentlens/worker", str(ROOT)).replace("/etc/momentlens/worker.env", str(env_file))
    unit = unit.replace("User=momentlens", "User=root").replace("Group=momentlens", "Group=root")
    path = tmp_path / "momentlens-worker.service"
    path.write_text(unit)
    result = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    # verify only warns about unknown keys and bad values: any output is a finding.
    assert result.stderr.strip() == "", result.stderr
    assert "ExecStartPre=" in unit
    assert "worker_check --start" in unit, "a storage outage must not keep the worker from starting"
    assert "Restart=always" in unit
    # An outage longer than WORKER_DB_RECOVERY_S fails every start until it ends: a start limit would leave no worker.
    assert "StartLimitIntervalSec=0" in unit
    assert "StartLimitBurst" not in unit


def nginx_binary() -> str | None:
    unpacked = ROOT / ".tools" / "nginx" / "usr" / "sbin" / "nginx"
    return str(unpacked) if unpacked.exists() else shutil.which("nginx")


def test_nginx_accepts_the_health_location(tmp_path):
    nginx = nginx_binary()
    if nginx is None:
        pytest.skip("nginx is not available (make tools unpacks it where apt exists)")
    (tmp_path / "logs").mkdir()
    temp = tmp_path / "temp"
    temp.mkdir()
    config = tmp_path / "nginx.conf"
    config.write_text(
        f"""
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/logs/error.log;
events {{}}
http {{
    access_log {tmp_path}/logs/access.log;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen 127.0.0.1:8080;
        include {DEPLOY / "nginx-health.conf"};
    }}
}}
"""
    )
    result = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr
    broken = tmp_path / "broken.conf"
    broken.write_text(config.read_text().replace(str(DEPLOY / "nginx-health.conf"), str(tmp_path / "bad.conf")))
    (tmp_path / "bad.conf").write_text("location = /x { proxy_pass; }")
    assert subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(broken)], capture_output=True).returncode != 0


def test_the_env_example_names_every_setting_the_unit_needs():
    example = (DEPLOY / "worker.env.example").read_text()
    for name in (
        "DATABASE_URL",
        "R2_ENDPOINT_URL",
        "R2_BUCKET",
        "R2_ACCESS_KEY_ID",
        "R2_SECRET_ACCESS_KEY",
        "SENTRY_DSN",
        "WORKER_HEALTH_PORT",
        "FACE_MODEL_PACK",
        "FACE_MODEL_ROOT",
        "ORT_INTRA_OP_THREADS",
    ):
        assert f"\n{name}=" in f"\n{example}"
