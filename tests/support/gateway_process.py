"""Run the real gateway (`python -m gateway serve`) as a subprocess for tests.

The gateway is started exactly as a user starts it, against a config the test writes.
When `REDIS_URL` is set the config points at that server with a key prefix of the
test's own (removed afterwards); otherwise the gateway starts its embedded Redis.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from gateway.adapters.upstream import HTTP_HANDLER_SWITCH

__all__ = ["GatewayProcess", "free_port", "gateway_config"]

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gateway_config(upstream_url: str, data_dir: Path, *, embedded: bool = False, **sections: Any) -> dict[str, Any]:
    """A config whose models point at the scripted upstream."""
    store: dict[str, Any] = {"data_dir": str(data_dir), "key_prefix": f"pcptest-{uuid.uuid4().hex[:8]}"}
    if not embedded and os.environ.get("REDIS_URL"):
        store["redis_url"] = os.environ["REDIS_URL"]
    config: dict[str, Any] = {
        "model_list": [
            {"model_name": "fake-model", "litellm_params": {"model": "openai/fake-model", "api_base": upstream_url, "api_key": "sk-upstream"}},
            {"model_name": "slow-model", "litellm_params": {"model": "openai/slow-model", "api_base": upstream_url, "api_key": "sk-upstream", "timeout": 1}},
        ],
        "router_settings": {"num_retries": 0, "disable_cooldowns": True},
        "server": {"max_body_bytes": 1_000_000},
        "store": store,
        # the tests of paging send short threads that would go raw (gateway.core.form): they exercise the paged
        # form; tests/http/test_form.py turns the raw form back on
        "pcp": {"raw_form": False},
    }
    for name, value in sections.items():
        config[name] = {**config.get(name, {}), **value} if isinstance(value, dict) else value
    return config


@dataclass
class GatewayProcess:
    """One gateway subprocess on a free port."""

    config: dict[str, Any]
    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    args: tuple[str, ...] = ()  # more `serve` options (e.g. --log-format json)
    env: dict[str, str | None] = field(default_factory=dict)  # environment variables to set (None: unset)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> GatewayProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config_path = self.workdir / "config.yaml"
        config_path.write_text(yaml.safe_dump(self.config), encoding="utf-8")
        self.log_path = self.workdir / f"gateway-{self.port}.log"
        # the gateway chooses its own upstream path (gateway.adapters.upstream.select_openai_path): a switch that an
        # in-process test set in this process's environment must not decide it for the child
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", HTTP_HANDLER_SWITCH)}
        env.update({k: v for k, v in self.env.items() if v is not None})
        for name in (k for k, v in self.env.items() if v is None):
            env.pop(name, None)
        with open(self.log_path, "wb") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gateway", "serve", "--config", str(config_path), "--port", str(self.port), *self.args],
                cwd=self.workdir,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(self.root_url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gateway did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        process, self.process = self.process, None
        if process is None:
            return 0
        if process.poll() is None:
            process.send_signal(sig)
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
