"""`pcp-gateway import` refuses a file it cannot read, or a --thread it cannot honour, before touching the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.chat_exports import run_cli


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    model = {"model_name": "m", "litellm_params": {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "api_key": "k"}}
    path.write_text(yaml.safe_dump({"model_list": [model], "store": {"data_dir": str(tmp_path / "data")}}), encoding="utf-8")
    return path


def test_an_unreadable_file_is_refused_with_its_place(config: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": 1}\n', encoding="utf-8")
    done = run_cli(config, "import", str(bad))
    assert done.returncode == 2 and "line 2: expected an object" in done.stderr
    assert not (tmp_path / "data").exists()  # the store was never opened


def test_a_thread_name_needs_one_conversation(config: Path, tmp_path: Path) -> None:
    two = tmp_path / "two.jsonl"
    lines = [{"thread": name, "messages": [{"role": "user", "content": name}]} for name in ("a", "b")]
    two.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    done = run_cli(config, "import", str(two), "--thread", "x")
    assert done.returncode == 2 and "--thread needs a file with one conversation" in done.stderr
    assert not (tmp_path / "data").exists()
