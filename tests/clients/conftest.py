"""Real client programs against the gateway subprocess and the scripted upstream (opt-in: ``pytest -m clients``).

The clients are looked for in ``$PCP_CLIENTS_DIR``, else ``.clients/`` at the top of the checkout, where
``scripts/setup-clients`` installs them: ``aider/`` (a venv with ``aider-chat``), ``opencode/`` (npm's
``opencode-ai``), ``continue/`` (npm's ``@continuedev/cli``), ``claude-code/`` (npm's ``@anthropic-ai/claude-code``)
and ``codex/`` (npm's ``@openai/codex``). A test whose client is not installed is skipped, saying how to install it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def clients_dir() -> Path:
    return Path(os.environ.get("PCP_CLIENTS_DIR") or ROOT / ".clients").resolve()  # the clients run from other directories


def client(relative: str) -> Path:
    """The client program at `relative` under the clients directory, or a skip naming what is missing."""
    path = clients_dir() / relative
    if not path.exists():
        pytest.skip(f"{path} is not installed (scripts/setup-clients installs the clients)")
    return path


def client_system(body: dict[str, Any]) -> str:
    """The client's own system prompt in a paged request body: the first message up to the gateway's Paged Context."""
    text = str(body["messages"][0]["content"])
    return text[: text.index("<PagedContext")]


def page_nodes(pages: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every page of a thread view, consolidated ones and the pages under them."""
    for page in pages:
        yield page
        yield from page_nodes(page.get("children", []))
