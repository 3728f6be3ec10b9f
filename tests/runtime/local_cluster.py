"""A multi-node Ray cluster and a JigSaw server as real processes on this machine, the way
docker-compose.yml lays them out: ``ray start --head``, worker nodes with logical GPUs
(``ray start --address ... --num-gpus``), and ``jigsaw-cli serve`` with the Ray executor.

Everything runs under a private temp dir and non-default ports, each ``ray start`` in its own
process group; teardown signals only those groups, so other Ray instances on the machine
(other engineers', other tests') are never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))


@contextmanager
def service_on_local_ray(root: Path, settings: dict[str, str]) -> Iterator[dict[str, str]]:
    """`jigsaw-cli serve` on the Ray executor (a local Ray it starts), its data and config
    under ``root``, with ``settings`` (``JIGSAW_*``) over the base environment; yields the
    environment a CLI needs (``JIGSAW_URL``; ``log`` is the server log's path)."""
    env = {
        **base_env(),
        "JIGSAW_DATA_DIR": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "JIGSAW_EXECUTOR": "ray",
        **settings,
    }
    for key in ("JIGSAW_DATABASE_URL", "JIGSAW_RAY_ADDRESS", "JIGSAW_ADMIN_TOKEN"):
        env.pop(key, None)
    server = ServerProcess(env, root / "server.log")
    try:
        server.wait_ready(timeout_s=180)
        yield {**env, "JIGSAW_URL": server.url, "log": str(server.log_path)}
    finally:
        server.stop()


def run_cli(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``jigsaw-cli ARGS`` against a ServerProcess's environment (its ``log`` entry, a test
    fixture's note of the server log path, is not passed on)."""
    clean = {k: v for k, v in env.items() if k != "log"}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            # Token auth would make every process of this private cluster share ~/.ray state.
            "RAY_AUTH_MODE": "disabled",
            "RAY_DEDUP_LOGS": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO),
        }
    )
    return env


class LocalRayCluster:
    def __init__(self) -> None:
        self.temp_dir = Path(tempfile.mkdtemp(prefix="jrc-", dir="/tmp"))
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen[bytes]] = []

    def _launch(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        agent_ports = [
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
        ]
        with (self.temp_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [RAY, "start", "--block", "--disable-usage-stats", *agent_ports, *args],
                env=base_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: teardown signals exactly it
            )
        self.nodes.append(process)
        self._wait_started(name, process)
        return process

    def _wait_started(
        self, name: str, process: subprocess.Popen[bytes], timeout_s: float = 120.0
    ) -> None:
        """One node at a time: on a busy 2-core box concurrent raylet starts time out."""
        log = self.temp_dir / f"{name}.log"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "block forever" in log.read_text(errors="replace"):
                return
            if process.poll() is not None:
                raise RuntimeError(f"ray node {name} exited: {self.log_tail(name)}")
            time.sleep(0.5)
        raise RuntimeError(f"ray node {name} did not start in {timeout_s}s: {self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.temp_dir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"

    def start_head(self) -> None:
        self._launch(
            "head",
            [
                "--head",
                f"--port={self.port}",
                f"--temp-dir={self.temp_dir}",
                "--num-cpus=1",
                "--num-gpus=0",
                "--include-dashboard=false",
                f"--dashboard-port={free_port()}",
                f"--ray-client-server-port={free_port()}",
            ],
        )

    def add_worker(self, name: str, gpus: int, cpus: int = 2) -> subprocess.Popen[bytes]:
        return self._launch(
            name, [f"--address={self.address}", f"--num-gpus={gpus}", f"--num-cpus={cpus}"]
        )

    def process_groups(self) -> list[int]:
        return [node.pid for node in self.nodes]

    def _our_processes(self) -> dict[int, str]:
        """Pid -> command of every process this cluster started: the ``ray start`` process
        groups and all their descendants (Ray's worker processes get process groups of their
        own, so they are found through their parent raylet)."""
        output = subprocess.run(
            ["ps", "-eo", "pid=,ppid=,pgid=,args="], capture_output=True, text=True, check=True
        ).stdout
        rows = []
        for line in output.splitlines():
            pid, ppid, pgid, *rest = line.split(None, 3)
            rows.append((int(pid), int(ppid), int(pgid), rest[0] if rest else ""))
        groups = {node.pid for node in self.nodes}
        ours = {pid: args for pid, _, pgid, args in rows if pgid in groups}
        grew = True
        while grew:
            grew = False
            for pid, ppid, _, args in rows:
                if ppid in ours and pid not in ours:
                    ours[pid] = args
                    grew = True
        return ours

    def gang_worker_pids(self) -> list[int]:
        """Pids of the SPB gang actors running on this cluster's nodes."""
        return sorted(
            pid for pid, args in self._our_processes().items() if args.startswith("ray::GangW")
        )

    def stop(self) -> None:
        started = self._our_processes()
        for node in self.nodes:
            _signal_group(node.pid, signal.SIGTERM)
        # A short grace only: the head's `ray start --block` does not finish a SIGTERM
        # shutdown within 20 s on two cores (a worker node takes ~30 s), so a longer wait
        # only delays the SIGKILL below.
        deadline = time.monotonic() + 2
        for node in self.nodes:
            try:
                node.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
        for node in self.nodes:  # whatever ignored SIGTERM (raylets) goes now
            _signal_group(node.pid, signal.SIGKILL)
            node.wait(10)
        for pid in {**started, **self._our_processes()}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class ServerProcess:
    """``python -m cli serve`` (what ``jigsaw-cli serve`` runs) with the given environment."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cli", "serve", "--port", str(self.port)],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.log_path = log_path

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"server not ready in {timeout_s}s: {self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        _signal_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            _signal_group(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
