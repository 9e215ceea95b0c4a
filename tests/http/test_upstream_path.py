"""The path a pass-through request takes to the upstream: litellm's own HTTP handler, the history intact.

litellm's default path for openai-compatible providers goes through the OpenAI SDK, whose request transform
walks every message in Python (hundreds of ms of CPU on a 600-turn thread); the gateway selects litellm's
HTTP handler instead (`gateway.adapters.upstream`). These tests pin both halves: the messages of a long,
mixed thread arrive exactly as sent, streamed or not, and they did not come through the OpenAI SDK (which
announces itself in the User-Agent and `x-stainless-*` headers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.fake_upstream import FakeUpstream, Recorded
from tests.support.gateway_process import GatewayProcess, gateway_config

OFF = {"X-PCP-Mode": "off"}


def _thread(turns: int) -> list[dict[str, Any]]:
    """A thread with every message shape: plain text, content parts, tool calls and their results."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        if i % 3 == 0:
            messages.append({"role": "user", "content": [{"type": "text", "text": f"part one of {i}"}, {"type": "text", "text": "part two"}]})
            messages.append({"role": "assistant", "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"q": "{i}"}}'}}]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"result {i} — ünïcode"})
            messages.append({"role": "assistant", "content": f"answer {i}"})
        else:
            messages.append({"role": "user", "content": f"question {i}"})
            messages.append({"role": "assistant", "content": f"answer {i}"})
    messages.append({"role": "user", "content": "and now?"})
    return messages


def _not_through_the_sdk(request: Recorded) -> None:
    assert not any(name.startswith("x-stainless") for name in request.headers)
    assert not request.headers.get("user-agent", "").startswith(("OpenAI/", "AsyncOpenAI/"))


@pytest.mark.parametrize("stream", [False, True])
def test_a_long_mixed_thread_reaches_the_upstream_as_sent(gateway: GatewayProcess, upstream: FakeUpstream, stream: bool) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-client", max_retries=0, default_headers=OFF)
    messages = _thread(120)
    if stream:
        chunks = client.chat.completions.create(model="fake-model", messages=messages, stream=True, temperature=0.2)  # type: ignore[call-overload]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        reply = client.chat.completions.create(model="fake-model", messages=messages, temperature=0.2)  # type: ignore[call-overload]
        text = reply.choices[0].message.content
    assert text == "ok"
    received = upstream.chat_requests[-1]
    assert received.body is not None
    assert received.body["messages"] == messages
    assert received.body["temperature"] == 0.2
    _not_through_the_sdk(received)


def test_a_configured_organization_still_reaches_the_upstream(upstream: FakeUpstream, tmp_path: Path) -> None:
    """litellm's handler would drop it, so a deployment with an organization keeps the OpenAI SDK path."""
    config = gateway_config(upstream.url, tmp_path / "data", pcp={"embeddings": False})
    config["model_list"][0]["litellm_params"]["organization"] = "org-bench"
    with GatewayProcess(config=config, workdir=tmp_path) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-client", max_retries=0, default_headers=OFF)
        reply = client.chat.completions.create(model="fake-model", messages=_thread(3))  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "ok"
    assert upstream.chat_requests[-1].headers.get("openai-organization") == "org-bench"
