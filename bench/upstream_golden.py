"""What goes upstream, byte for byte: a guard for changes that move work without changing what is computed.

Replays the first conversation of a shape (``bench/datasets.py``) through the real gateway against the recording
fake upstream, exactly as ``bench/evidence_recall.py`` does (one request per session with the whole history so
far, the session's date as ``X-PCP-Time``), but waits for the thread's background work after every session so
that the store is the same at every request whatever the machine's speed; then asks the first questions at each
budget. Every first-round upstream request body is kept as sent (raw bytes). ``--record FILE`` writes them;
``--check FILE`` replays again and reports the first request whose body differs (exit status 1).

Run from the repository root:

    .venv/bin/python -m bench.upstream_golden --record /tmp/golden.json [--dataset messaging] [--questions 6]
    .venv/bin/python -m bench.upstream_golden --check /tmp/golden.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.datasets import load_locomo, to_messaging  # noqa: E402
from bench.evidence_recall import MODEL, history_messages, log  # noqa: E402


def _first_round(fake: object, last: str) -> bytes | None:
    """The raw body of the first upstream chat request whose last message is ``last``."""
    for rec in fake.chat_requests:  # type: ignore[attr-defined]
        messages = (rec.body or {}).get("messages") or []
        if messages and messages[-1].get("content") == last:
            return bytes(rec.raw)
    return None


def run(dataset: str, questions: int, budgets: Sequence[int], sessions: int | None) -> list[tuple[str, str]]:
    import httpx

    from tests.support.fake_upstream import FakeUpstream
    from tests.support.gateway_process import GatewayProcess, gateway_config

    data = load_locomo()
    if dataset == "messaging":
        data = to_messaging(data)
    conv = data.conversations[0]
    out: list[tuple[str, str]] = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pcp-golden-")))
        fake = stack.enter_context(FakeUpstream())
        config = gateway_config(fake.url, tmp / "data", embedded=True, pcp={"budget_tokens": 4000, "raw_form": True})
        config["server"]["max_body_bytes"] = 64_000_000
        gw = GatewayProcess(config=config, workdir=tmp)
        stack.callback(gw.stop)
        log(f"starting the gateway (embedded Redis in {tmp}) ...")
        gw.start(timeout=300.0)
        client = stack.enter_context(httpx.Client(timeout=300.0))
        thread = f"golden-{conv.id}"

        def headers(when: object) -> dict[str, str]:
            return {"Authorization": "Bearer sk-golden", "X-PCP-Thread": thread, "X-PCP-Time": when.isoformat()}  # type: ignore[attr-defined]

        def settle() -> None:
            import time

            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                r = client.get(f"{gw.root_url}/pcp/threads/{thread}", headers=headers(conv.question_time))
                if r.status_code != 200 or not (r.json() or {}).get("pending_jobs", 0):
                    return
                time.sleep(0.2)

        def post(key: str, messages: list[dict[str, str]], extra: dict[str, str]) -> None:
            fake.reset()
            r = client.post(gw.base_url + "/chat/completions", json={"model": MODEL, "messages": messages}, headers=extra)
            body = _first_round(fake, messages[-1]["content"])
            out.append((key, f"HTTP {r.status_code} form={r.headers.get('x-pcp-form')}\n"
                        + (body.decode("utf-8") if body is not None else "<nothing upstream>")))

        history = []
        for n, (when, turns) in enumerate(conv.sessions[:sessions] if sessions else conv.sessions):
            history.extend(turns)
            post(f"session {n}", history_messages(history), headers(when))
            settle()
        full = history_messages(history)
        for q in conv.questions[:questions]:
            for budget in budgets:
                post(f"question {q.text!r} at {budget}", [*full, {"role": "user", "content": q.text}],
                     {**headers(conv.question_time), "X-PCP-Budget": str(budget)})
        log(f"{len(out)} requests replayed")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dataset", default="messaging", choices=("messaging", "locomo"))
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=0, help="replay only the first N sessions (0: all)")
    parser.add_argument("--budgets", default="1000,2000,4000")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path)
    mode.add_argument("--check", type=Path)
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    bodies = run(args.dataset, args.questions, budgets, args.sessions or None)
    if args.record:
        args.record.write_text(json.dumps(bodies, ensure_ascii=False, indent=0), encoding="utf-8")
        print(f"recorded {len(bodies)} upstream bodies in {args.record}")
        return 0
    expected = [tuple(item) for item in json.loads(args.check.read_text(encoding="utf-8"))]
    for (key, body), (want_key, want) in zip(bodies, expected):
        if (key, body) != (want_key, want):
            at = next((i for i, (a, b) in enumerate(zip(body, want)) if a != b), min(len(body), len(want)))
            print(f"DIFFERS at {key}: char {at}\n  got:  {body[max(at - 200, 0):at + 200]!r}\n  want: {want[max(at - 200, 0):at + 200]!r}")
            return 1
    if len(bodies) != len(expected):
        print(f"DIFFERS: {len(bodies)} requests, {len(expected)} expected")
        return 1
    print(f"identical: {len(bodies)} upstream bodies")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
