"""The gateway in front of a real small model (llama.cpp + Qwen2.5-Coder-1.5B on loopback): what the scripted
upstream cannot show — that a real model's Consult round recovers a fact, that its tool calls and a client's
tools pass through, and that the server's own failures (an HTTP 500 for output it cannot parse, a reply cut at
``max_tokens``) reach the client as a clean OpenAI answer or error, never a hang.

Opt-in (``pytest -m real_model``); skipped when the model is not installed (``scripts/local-model install``).
Every request is at temperature 0, so a run repeats itself; each takes seconds to a minute on two cores.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
import pytest

from tests.real_model.conftest import MODEL
from tests.support.gateway_process import GatewayProcess

pytestmark = pytest.mark.real_model

REQUEST_TIMEOUT_S = 600.0  # a bound, not a expectation: a hang fails here instead of stalling the run

FACT = "Locker: number 52, combination 4-7-1-9."
NOTES = [
    "Gym notes for the Harbor Street gym, as you dictated them:",
    "Opening hours: 6 am to 10 pm on weekdays, 8 am to 8 pm on weekends; the pool closes an hour earlier.",
    "Membership: the annual plan renews on 1 March; the front desk wants the card shown at every visit.",
    "Trainer: Marta, Tuesdays and Thursdays at 7 pm; cancel a session a day ahead or it is charged.",
    "Classes: spin on Monday, yoga on Wednesday, and the rowing circuit on Saturday mornings.",
    FACT,
    "Parking: the lot behind the building is free for two hours with the ticket stamped at reception.",
    "Towels: bring your own; the rental ones cost two euros and run out after six in the evening.",
    "Showers: the ones on the second floor have better water pressure than the ground floor.",
    "Nutrition: the cafe sells protein shakes, but the bakery next door is cheaper for a snack.",
    "Goals: three sessions a week, 5 km on the rower by June, and a stretch after every workout.",
]
FILLER = ["sourdough starter", "bicycle gears", "tax forms", "python asyncio", "hiking boots", "jazz chords",
          "tomato blight", "solar panels", "watercolor paper", "chess openings", "kayak paddles", "houseplants"]


def _client(gateway: GatewayProcess, thread: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="none", max_retries=0, timeout=REQUEST_TIMEOUT_S,
                         default_headers={"X-PCP-Thread": thread, **headers})


def _thread() -> str:
    return "real-" + uuid.uuid4().hex[:10]


def history() -> list[dict[str, Any]]:
    """A fact told once early, then many exchanges about other things, so the budget cannot keep it in Detail."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "I joined a new gym. Write my notes about it up neatly, I will dictate them."},
        {"role": "assistant", "content": "\n".join(NOTES)},
    ]
    for i, topic in enumerate(FILLER * 2):
        messages.append({"role": "user", "content": f"Give me one practical tip about {topic}, short please."})
        messages.append({"role": "assistant", "content": f"Tip {i} on {topic}: start small, keep notes of what "
                         f"you try, and check your progress every {i % 5 + 2} days so problems show up early."})
    return messages


QUESTION = "I forgot the code that opens my gym padlock. What is it?"


@pytest.mark.parametrize("stream", [False, True])
def test_a_fact_out_of_detail_is_recovered_through_a_consult_round(real_gateway: GatewayProcess, stream: bool) -> None:
    messages = [*history(), {"role": "user", "content": QUESTION}]
    client = _client(real_gateway, _thread(), **{"X-PCP-Budget": "700"})
    if stream:  # read the raw events: the rounds arrive as the closing SSE comment, not as a header
        body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 120, "stream": True}
        headers = {"X-PCP-Thread": _thread(), "X-PCP-Budget": "700"}
        pieces, rounds = [], "0"
        with httpx.stream("POST", real_gateway.base_url + "/chat/completions", json=body, headers=headers,
                          timeout=REQUEST_TIMEOUT_S) as response:
            for line in response.iter_lines():
                if line.startswith(": x-pcp-rounds:"):
                    rounds = line.split(":")[-1].strip()
                elif line.startswith("data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    assert not choices[0].get("delta", {}).get("tool_calls")
                    pieces.append(choices[0].get("delta", {}).get("content") or "")
        text = "".join(pieces)
    else:
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, temperature=0,  # type: ignore[arg-type]
                                                               max_tokens=120)
        reply = raw.parse().choices[0].message
        assert reply.tool_calls is None
        text = reply.content or ""
        rounds = raw.headers["x-pcp-rounds"]
    print(f"\nrounds={rounds} reply={text!r}")
    assert int(rounds) >= 2  # the model asked for the page
    assert "4-7-1-9" in text or "4719" in text
    assert "pcp_consult" not in text and '"arguments"' not in text


def test_a_client_tool_call_is_passed_through(real_gateway: GatewayProcess) -> None:
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    messages = [*history()[:6], {"role": "user", "content": "What is the weather in Lisbon right now? Use the tool."}]
    completion = _client(real_gateway, _thread()).chat.completions.create(
        model=MODEL, messages=messages, tools=[weather], tool_choice="required", temperature=0, max_tokens=80)  # type: ignore[arg-type,list-item]
    choice = completion.choices[0]
    print(f"\nfinish={choice.finish_reason} calls={choice.message.tool_calls}")
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert "lisbon" in json.loads(call.function.arguments)["city"].lower()  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_cut_at_max_tokens_is_a_clean_answer(real_gateway: GatewayProcess, stream: bool) -> None:
    messages = [*history()[:4], {"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    client = _client(real_gateway, _thread())
    if stream:
        chunks = list(client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=8,  # type: ignore[arg-type]
                                                     stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    else:
        completion = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=8)  # type: ignore[arg-type]
        text, finish = completion.choices[0].message.content or "", [completion.choices[0].finish_reason]
    assert finish == ["length"] and text.strip()


def test_output_the_server_cannot_parse_becomes_a_clean_answer_or_error(real_gateway: GatewayProcess) -> None:
    # text after a JSON tool call under tool_choice "auto": llama-server answers HTTP 500 ("does not match the
    # expected peg-native format") when it cannot parse that; the client gets an OpenAI answer or error, in time
    note = {"type": "function", "function": {
        "name": "save_note", "description": "Save a note.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
    prompt = ('Reply with exactly this, on two lines: first {"name": "save_note", "arguments": {"text": "milk"}} '
              "and then the sentence: I saved your note about milk, anything else?")
    messages = [{"role": "user", "content": prompt}]
    response = httpx.post(real_gateway.base_url + "/chat/completions", timeout=REQUEST_TIMEOUT_S,
                          headers={"X-PCP-Thread": _thread()},
                          json={"model": MODEL, "messages": messages, "tools": [note], "temperature": 0, "max_tokens": 80})
    print(f"\nstatus={response.status_code} body={response.text[:300]}")
    body = response.json()
    if response.status_code == 200:
        assert body["choices"][0]["message"]["role"] == "assistant"
    else:
        assert 400 <= response.status_code < 600 and response.status_code != 500
        assert set(body["error"]) >= {"message", "type"} and "Traceback" not in body["error"]["message"]
