"""Conversation files for the import tests, and running `pcp-gateway import` as a user does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.gateway_process import ROOT

__all__ = ["chatgpt_export", "run_cli"]


def chatgpt_export(thread: str, messages: list[dict[str, Any]], start: int = 1_714_557_600) -> list[dict[str, Any]]:
    """ChatGPT's conversations.json shape for one conversation: a chain of nodes from a root, an exchange a
    minute (one sitting: no idle flush between exchanges)."""
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for n, message in enumerate(messages):
        mapping[f"n{n}"] = {
            "id": f"n{n}",
            "parent": "root" if n == 0 else f"n{n - 1}",
            "children": [f"n{n + 1}"] if n + 1 < len(messages) else [],
            "message": {
                "author": {"role": message["role"]},
                "content": {"content_type": "text", "parts": [message["content"]]},
                "create_time": start + 60 * (n // 2),
            },
        }
    return [{"title": thread, "conversation_id": thread, "current_node": f"n{len(messages) - 1}", "mapping": mapping}]


def write_export(path: Path, thread: str, messages: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(chatgpt_export(thread, messages)), encoding="utf-8")
    return path


def run_cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m gateway ARGS --config CONFIG` from the repository root, with a wide terminal for the bar."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args, "--config", str(config)], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env
    )
