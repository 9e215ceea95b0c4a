"""What a model's Consults cost: a long OpenAI-SDK chat at a small budget, with a scripted model that consults.

The real gateway (``python -m gateway serve``, embedded Redis in a temp dir) runs against the recording fake upstream
on loopback. One thread of ``--turns`` exchanges on four topics of 30 exchanges each, two minutes apart, with three
hours between topics (so each topic freezes into a container), every reply ~250 tokens, at ``X-PCP-Budget``
``--budget``. Every ``--every``-th turn the scripted model answers the first round with a Consult of the first
consolidated node its context shows (else of its first ``[id]`` line), then answers the next round. It prints the
tokens every upstream call received (cl100k, as ``TokenCounter.count_messages`` counts them), the first rounds
and the Consults' later rounds apart, and how many first rounds lack the question of the exchange the turn follows.

Run from the repository root:

    .venv/bin/python -m bench.zoom_rounds [--turns 120] [--budget 1000] [--every 4]
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import tempfile
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import openai

from gateway.core import TokenCounter
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, Response, ToolCall
from tests.support.gateway_process import GatewayProcess, gateway_config

TOPICS = (
    ("sourdough", "starter flour hydration crumb oven loaf bake proof"),
    ("kayak", "paddle river rapids spray skirt roll hull current"),
    ("asyncio", "event loop task coroutine await cancel timeout gather"),
    ("garden", "tomato compost mulch seedlings frost watering beds"),
)
TOPIC_TURNS = 30
_CONTAINER = re.compile(r'<Node id="([0-9a-f]{8,12})" type="Consolidated"')
_LINE = re.compile(r"^\[([0-9a-f]{8,12})\]", re.M)


def _topic(turn: int) -> tuple[str, list[str]]:
    name, words = TOPICS[(turn // TOPIC_TURNS) % len(TOPICS)]
    return name, words.split()


def question(turn: int) -> str:
    name, w = _topic(turn)
    return f"Question {turn} about {name}: how do the {w[turn % len(w)]} and the {w[(turn * 3 + 1) % len(w)]} interact when I change step {turn % 7}?"


def reply(turn: int) -> str:
    name, w = _topic(turn)
    return " ".join(
        f"For {name} step {turn % 7}, the {w[(turn + k) % len(w)]} matters: keep note {turn}-{k} in mind and adjust the "
        f"{w[(turn + 2 * k) % len(w)]} gradually."
        for k in range(9)
    )


class ConsultingModel:
    """The scripted upstream: records what each call received; consults on every ``every``-th turn."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.turn = 0
        self.counter = TokenCounter()
        self.first: list[int] = []
        self.later: list[int] = []
        self.followed: list[bool] = []  # per first round after the first turn: whether the previous question was in it

    def __call__(self, recorded: Recorded) -> Response:
        messages = (recorded.body or {}).get("messages", [])
        zoomed = any(m.get("role") == "tool" for m in messages)
        (self.later if zoomed else self.first).append(self.counter.count_messages(messages))
        system = str(messages[0].get("content")) if messages else ""
        if not zoomed and self.turn:
            sent = html.unescape("\n".join(str(m.get("content")) for m in messages))
            self.followed.append(question(self.turn - 1) in sent)
        if not zoomed and self.turn % self.every == self.every - 1 and "<PagedContext" in system:
            ids = _CONTAINER.findall(system) or _LINE.findall(system)
            if ids:
                arguments = json.dumps({"reason": "check what was said", "ids": ids[:1]})
                return Reply(content=None, tool_calls=[ToolCall("pcp_consult", arguments)])
        return Reply(content=reply(self.turn))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--every", type=int, default=4, help="the model consults on every N-th turn")
    args = parser.parse_args(argv)
    model = ConsultingModel(args.every)
    flagged = 0
    with FakeUpstream() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.default = model  # type: ignore[assignment]  # a callable answers as a scripted one does
        config = gateway_config(fake.url, Path(tmp) / "data", pcp={"raw_form": True})
        with GatewayProcess(config=config, workdir=Path(tmp)) as gateway:
            headers = {"X-PCP-Thread": "zoom-rounds-" + uuid.uuid4().hex[:8], "X-PCP-Budget": str(args.budget)}
            client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-bench", default_headers=headers)
            history: list[dict[str, str]] = []
            start = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
            for turn in range(args.turns):
                model.turn = turn
                when = start + timedelta(minutes=2 * turn, hours=3 * (turn // TOPIC_TURNS))
                history.append({"role": "user", "content": question(turn)})
                raw = client.chat.completions.with_raw_response.create(
                    model="fake-model", messages=history, extra_headers={"X-PCP-Time": when.isoformat()}  # type: ignore[arg-type]
                )
                flagged += raw.headers.get("x-pcp-over-budget") == "true"
                history.append({"role": "assistant", "content": raw.parse().choices[0].message.content or ""})
    budget = args.budget
    print(f"turns {args.turns}, budget {budget}, upstream calls {len(model.first) + len(model.later)}, x-pcp-over-budget: true on {flagged}")
    print(f"first rounds: {len(model.first)}, max {max(model.first)} tokens, over the budget {sum(t > budget for t in model.first)}")
    print(f"first rounds without the question of the exchange the turn follows: {model.followed.count(False)} of {len(model.followed)}")
    if model.later:
        later = model.later
        print(f"the Consults' later rounds: {len(later)}, median {statistics.median(later):.0f}, max {max(later)} tokens; "
              f"over the budget {sum(t > budget for t in later)}, over twice the budget {sum(t > 2 * budget for t in later)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
