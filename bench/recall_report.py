"""The evidence-recall report: one Markdown section per conversation shape, a summary across shapes, and the
marked sections they replace: each shape's in ``docs/benchmark-results.md``, the summary in ``docs/benchmarks.md``.

Owns: the tables (recall by method, budget and category; gateway misses by distance back; requests that fit their
budget against their raw size; forms; router latency) and the docs markers. It computes nothing about the gateway
itself: it reads ``Outcome``s and ``GatewayStats``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.baselines import Outcome
from bench.datasets import Conversation, Dataset

DISTANCE_BUCKETS = ((0, 50, "0–50"), (51, 200, "51–200"), (201, 400, "201–400"), (401, 10**9, "400+"))
GATEWAY, RECENT, CHUNKS, CHUNKS_WITHIN = "pcp gateway", "recent turns", "BM25 chunks", "BM25 chunks ≤256"
# ../shared/data/README.md: LoCoMo's are measured with B = history text tokens only, LongMemEval's with the same
# B as here (first-round tokens, question included) on a 30-question sample.
REFERENCE = {
    "locomo": {"recent turns (history-only B)": (0.04, 0.09, 0.19), "BM25 chunks (history-only B)": (0.73, 0.79, 0.85)},
    "longmemeval": {RECENT: (0.00, 0.03, 0.03), CHUNKS: (0.76, 0.81, 0.88), CHUNKS_WITHIN: (0.76, 0.81, 0.88)},
}
SUMMARY_MARKERS = ("<!-- evidence-recall-summary:begin -->", "<!-- evidence-recall-summary:end -->")
SECTION_MARKERS = {
    "locomo": ("<!-- evidence-recall:begin -->", "<!-- evidence-recall:end -->"),
    "messaging": ("<!-- evidence-recall-messaging:begin -->", "<!-- evidence-recall-messaging:end -->"),
    "locomo-names": ("<!-- evidence-recall-locomo-names:begin -->", "<!-- evidence-recall-locomo-names:end -->"),
    "messaging-names": ("<!-- evidence-recall-messaging-names:begin -->", "<!-- evidence-recall-messaging-names:end -->"),
    "realtalk": ("<!-- evidence-recall-realtalk:begin -->", "<!-- evidence-recall-realtalk:end -->"),
    "longmemeval": ("<!-- evidence-recall-longmemeval:begin -->", "<!-- evidence-recall-longmemeval:end -->"),
    "chinese": ("<!-- evidence-recall-chinese:begin -->", "<!-- evidence-recall-chinese:end -->"),
}
SUMMARY_HEAD = ("| shape | questions | gateway @1k / @2k / @4k | BM25 chunks | BM25 chunks ≤256 | recent turns | "
                "over budget (header / own count) | router ms p50 | requests that fit B: mean sent / raw "
                "(sent > raw) | run |", "|---|---:|---|---|---|---|---|---:|---|---|")


@dataclass
class GatewayStats:
    replay_s: float = 0.0  # requests and the wait for background work
    wait_s: float = 0.0  # the wait alone
    questions_s: float = 0.0
    router_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    header_seen: int = 0
    # "<B>" for question requests, "replay" for replay requests (at replay_budget)
    header_over: Counter[str] = field(default_factory=Counter)  # x-pcp-prompt-tokens > B
    measured_over: Counter[str] = field(default_factory=Counter)  # our count of the received messages > B
    flagged_over: Counter[str] = field(default_factory=Counter)  # x-pcp-over-budget: true (the client's own parts)
    header_mismatch: int = 0  # |x-pcp-prompt-tokens - our count| > 2
    errors: list[str] = field(default_factory=list)
    pending_endpoint: str = "not tried"
    requests: int = 0
    no_upstream: int = 0
    rounds: Counter[str] = field(default_factory=Counter)
    replay_budget: int = 4000
    replay_requests: int = 0
    replay_fit: list[tuple[int, int]] = field(default_factory=list)  # (sent, raw) where raw fits replay_budget
    replay_forms: Counter[str] = field(default_factory=Counter)


def stats_to_json(stats: GatewayStats) -> dict[str, object]:
    return {k: dict(v) if isinstance(v, dict) else v for k, v in vars(stats).items()}


def stats_from_json(record: Mapping[str, object]) -> GatewayStats:
    """The inverse of `stats_to_json` (a replay kept by ``--replay-cache``)."""
    stats = GatewayStats()
    for key, value in record.items():
        current = getattr(stats, key, None)
        if isinstance(current, Counter):
            current.update(value)  # type: ignore[arg-type]
        elif isinstance(current, defaultdict):
            current.update(value)  # type: ignore[call-overload]
        elif key == "replay_fit":
            stats.replay_fit = [(int(s), int(r)) for s, r in value]  # type: ignore[attr-defined, union-attr]
        elif hasattr(stats, key):
            setattr(stats, key, value)
    return stats


def mean(xs: Iterable[float]) -> float:
    values = list(xs)
    return sum(values) / len(values) if values else float("nan")


def fmt(x: float) -> str:
    return "—" if x != x else f"{x:.3f}"


def percentile(xs: Sequence[float], p: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def recall_at(outs: Iterable[Outcome], budget: int) -> float:
    return mean(o.recall for o in outs if o.budget == budget)


def recall_table(results: Mapping[str, list[Outcome]], budgets: Sequence[int], categories: Sequence[str]) -> str:
    lines = [f"| method | B | recall | {' | '.join(categories)} | all-evidence | tokens used (mean) | questions |",
             "|---|---:|---:|" + "---:|" * len(categories) + "---:|---:|---:|"]
    for method, outs in results.items():
        for budget in budgets:
            rows = [o for o in outs if o.budget == budget]
            if not rows:
                continue
            per_cat = " | ".join(fmt(mean(o.recall for o in rows if o.category == c)) for c in categories)
            lines.append(f"| {method} | {budget} | **{fmt(mean(o.recall for o in rows))}** | {per_cat} | "
                         f"{fmt(mean(o.all_kept for o in rows))} | {mean(o.tokens for o in rows):.0f} | {len(rows)} |")
    return "\n".join(lines)


def answer_lines(results: Mapping[str, list[Outcome]], budgets: Sequence[int]) -> list[str]:
    """How often each method's context held the answer itself, over the questions whose answer can be checked
    (``bench.datasets.checkable_answer``): a view of part of a long turn (an excerpt) may hold the answer and
    still not count as keeping the turn."""
    checked = {method: [o for o in outs if o.answer_shown is not None] for method, outs in results.items()}
    questions = max((sum(o.budget == budgets[0] for o in outs) for outs in checked.values()), default=0)
    if not questions:
        return []
    cells = [f"{method} {' / '.join(fmt(mean(float(bool(o.answer_shown)) for o in outs if o.budget == b)) for b in budgets)}"
             for method, outs in checked.items() if outs]
    return [f"Answer shown, @{' / @'.join(str(b) for b in budgets)} ({questions} questions whose gold answer is said in "
            "their evidence verbatim and nowhere else in the history; a turn counts above only when all of it is "
            "shown): " + "; ".join(cells) + "."]


def bucket(distance: int) -> str:
    for lo, hi, name in DISTANCE_BUCKETS:
        if lo <= distance <= hi:
            return name
    return DISTANCE_BUCKETS[-1][2]


def misses_table(outs: Sequence[Outcome], convs: Mapping[str, Conversation], budget: int,
                 categories: Sequence[str]) -> str:
    last = {cid: len(c.turns) - 1 for cid, c in convs.items()}
    cells: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])  # (category, bucket) -> [missed, total]
    for o in outs:
        if o.budget != budget:
            continue
        for ev, missed in [*((e, False) for e in o.kept_ids), *((e, True) for e in o.missed_ids)]:
            counts = cells[(o.category, bucket(last[o.conv] - convs[o.conv].evidence[ev].index))]
            counts[0] += missed
            counts[1] += 1
    names = [name for _, _, name in DISTANCE_BUCKETS]

    def cell(keys: Iterable[tuple[str, str]]) -> str:
        m = sum(cells[k][0] for k in keys if k in cells)
        t = sum(cells[k][1] for k in keys if k in cells)
        return f"{m}/{t}" + (f" ({m / t:.0%})" if t else "")

    lines = ["| category \\ distance back (messages) | " + " | ".join(names) + " | all |",
             "|---|" + "---:|" * (len(names) + 1)]
    for c in categories:
        lines.append(f"| {c} | " + " | ".join(cell([(c, b)]) for b in names) + f" | {cell([(c, b) for b in names])} |")
    lines.append("| all | " + " | ".join(cell([(c, b) for c in categories]) for b in names)
                 + f" | {cell([(c, b) for c in categories for b in names])} |")
    return "\n".join(lines)


def reference_table(name: str, results: Mapping[str, list[Outcome]], budgets: Sequence[int]) -> str:
    refs = REFERENCE.get(name, {})
    lines = ["| method | " + " | ".join(f"@{b}" for b in budgets) + " | reference @1k / @2k / @4k |",
             "|---|" + "---:|" * len(budgets) + "---|"]
    for method, ref in refs.items():
        vals = " | ".join(fmt(recall_at(results.get(method, []), b)) for b in budgets)
        lines.append(f"| {method} | {vals} | {' / '.join(f'{r:.2f}' for r in ref)} |")
    return "\n".join(lines)


def fit_lines(outs: Sequence[Outcome], stats: GatewayStats, budgets: Sequence[int]) -> list[str]:
    """Requests whose raw form (the client's messages as sent) fits the budget: what the upstream got instead."""
    lines = []
    for budget in budgets:
        fit = [o for o in outs if o.budget == budget and o.raw_tokens and o.raw_tokens <= budget]
        lines.append(f"  - questions at B = {budget}: {len(fit)} of {sum(o.budget == budget for o in outs)} fit"
                     + (f"; mean sent {mean(o.tokens for o in fit):.0f} vs raw {mean(o.raw_tokens for o in fit):.0f}"
                        f"; sent > raw: **{sum(o.tokens > o.raw_tokens for o in fit)}**" if fit else ""))
    pairs = stats.replay_fit
    lines.append(f"  - replay requests at the configured B = {stats.replay_budget}: {len(pairs)} of "
                 f"{stats.replay_requests} fit"
                 + (f"; mean sent {mean(s for s, _ in pairs):.0f} vs raw {mean(r for _, r in pairs):.0f}; "
                    f"sent > raw: **{sum(s > r for s, r in pairs)}**" if pairs else ""))
    return lines


def form_line(outs: Sequence[Outcome], stats: GatewayStats, budgets: Sequence[int]) -> str:
    def counts(c: Counter[str]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))

    per_budget = "; ".join(f"B = {b}: {counts(Counter(o.form for o in outs if o.budget == b))}" for b in budgets)
    return (f"- `x-pcp-form` (absent = n/a): questions {per_budget}; replay at B = {stats.replay_budget}: "
            f"{counts(stats.replay_forms)}")


def router_lines(stats: GatewayStats, convs: Mapping[str, Conversation]) -> list[str]:
    every = [ms for xs in stats.router_ms.values() for ms in xs]
    if not every:
        return ["- router ms (`x-pcp-router-ms`): n/a (header absent)"]
    longest = max(stats.router_ms, key=lambda cid: len(convs[cid].turns))
    n, xs = len(convs[longest].turns), stats.router_ms[longest]
    note = "" if n >= 600 else " — no thread of ≥ 600 messages in this run"
    return [f"- router ms over the question requests ({len(every)}): p50 {percentile(every, .5):.1f}, "
            f"p90 {percentile(every, .9):.1f}",
            f"- router ms on the longest thread ({n} messages, {longest}): p50 {percentile(xs, .5):.1f}, "
            f"p90 {percentile(xs, .9):.1f} ({len(xs)} requests){note}"]


def over_text(stats: GatewayStats) -> str:
    return f"{sum(stats.header_over.values())} / {sum(stats.measured_over.values())}"


def gateway_lines(outs: Sequence[Outcome], stats: GatewayStats, convs: Mapping[str, Conversation],
                  budgets: Sequence[int]) -> list[str]:
    n_q = len(outs)
    over = "; ".join(f"{key}: {stats.header_over[key]} / {stats.measured_over[key]} / {stats.flagged_over[key]}"
                     for key in [*(f"B = {b}" for b in budgets), "replay"])
    return [
        f"- wall time: replay {stats.replay_s:.1f} s (of which {stats.wait_s:.1f} s waiting for background work), "
        f"questions {stats.questions_s:.1f} s "
        f"({stats.questions_s / max(n_q, 1) * 1000:.0f} ms per question request); {stats.requests} requests, "
        f"{len(stats.errors)} errors, {stats.no_upstream} without an upstream call",
        f"- requests over budget (`x-pcp-prompt-tokens` > B / our own count of the received messages > B / "
        f"flagged `x-pcp-over-budget: true`; replay requests at B = {stats.replay_budget}): {over} "
        f"({stats.header_seen} responses carried the header)",
        "- requests whose raw form fits the budget (history + question as messages, cl100k): tokens the upstream "
        "received vs. the raw size",
        *fit_lines(outs, stats, budgets),
        form_line(outs, stats, budgets),
        "- whitespace-insensitive recall (not the measure above): "
        + ", ".join(f"@{b} {fmt(mean(o.loose_recall for o in outs if o.budget == b))}" for b in budgets),
        "- evidence within one Consult (shown, or the page holding it or its topic named by id in the first round), "
        "and within reach (or a chapter above it named: a Consult per level): "
        + ", ".join(f"@{b} {fmt(mean(o.reach for o in outs if o.budget == b))} / "
                    f"{fmt(mean(o.named_share for o in outs if o.budget == b))}" for b in budgets),
        f"- `x-pcp-prompt-tokens` vs our count of the received messages: {stats.header_mismatch} differ by > 2",
        f"- `x-pcp-rounds`: {dict(stats.rounds)}; background-work endpoint: {stats.pending_endpoint}",
        *router_lines(stats, convs),
    ]


def shape_line(data: Dataset) -> str:
    turns = [t for c in data.conversations for t in c.turns]
    runs: list[int] = []
    for c in data.conversations:
        prev = None
        for t in c.turns:
            if t.role == prev:
                runs[-1] += 1
            else:
                runs.append(1)
            prev = t.role
    n_q = sum(len(c.questions) for c in data.conversations)
    skipped = sum(c.skipped_questions for c in data.conversations)
    note = data.note + (f"; {skipped} without usable evidence skipped" if skipped else "")
    return (f"Data: {len(data.conversations)} conversation(s), {len(turns)} messages, {n_q} questions ({note}). "
            f"Runs of consecutive messages of one role: mean {mean(runs):.1f}, p90 {percentile(runs, .9):.0f}, "
            f"max {max(runs, default=0)}; runs of 3 or more: {sum(r >= 3 for r in runs) / max(len(runs), 1):.0%}.")


def section(data: Dataset, budgets: Sequence[int], results: Mapping[str, list[Outcome]],
            reference: Mapping[str, list[Outcome]], stats: GatewayStats | None, command: str, when: str) -> str:
    by_cid = {c.id: c for c in data.conversations}
    parts = [f"Command: `{command}` (run {when})", "", shape_line(data), "", recall_table(results, budgets,
                                                                                          data.categories)]
    answered = answer_lines(results, budgets)
    if answered:
        parts += ["", *answered]
    if data.name in REFERENCE:
        parts += ["", "Baselines against the reference points of `../shared/data/README.md`"
                  + (" (B = history text tokens only, no question, no overhead):" if data.name == "locomo"
                     else " (same B as above; the reference is a 30-question sample):"), "",
                  reference_table(data.name, {**results, **reference}, budgets)]
    gw = results.get(GATEWAY, [])
    if stats is not None:
        miss_budget = 2000 if 2000 in budgets else budgets[0]
        parts += ["", f"Gateway misses at B = {miss_budget} (missed / evidence turns), by category and distance back "
                  "(messages between the evidence's last message and the end of the history):", "",
                  misses_table(gw, by_cid, miss_budget, data.categories), "", "Gateway run:", "",
                  *gateway_lines(gw, stats, by_cid, budgets)]
        if stats.errors:
            parts += ["", "First errors:", "", *(f"- `{e}`" for e in stats.errors[:5])]
    return "\n".join(parts)


def summary_row(data: Dataset, budgets: Sequence[int], results: Mapping[str, list[Outcome]],
                stats: GatewayStats | None, when: str) -> str:
    def triple(method: str) -> str:
        outs = results.get(method, [])
        return " / ".join(fmt(recall_at(outs, b)) for b in budgets) if outs else "not run"

    n_q = sum(len(c.questions) for c in data.conversations)
    over, router, fits = "—", "—", "—"
    if stats is not None:
        over = over_text(stats)
        every = [ms for xs in stats.router_ms.values() for ms in xs]
        router = f"{percentile(every, .5):.1f}" if every else "n/a"
        pairs = [*stats.replay_fit, *((o.tokens, o.raw_tokens) for o in results.get(GATEWAY, [])
                                      if o.raw_tokens and o.raw_tokens <= o.budget)]
        fits = (f"{mean(s for s, _ in pairs):.0f} / {mean(r for _, r in pairs):.0f} ({sum(s > r for s, r in pairs)} "
                f"of {len(pairs)})") if pairs else "none fit"
    return (f"| {data.title} | {n_q} | {triple(GATEWAY)} | {triple(CHUNKS)} | {triple(CHUNKS_WITHIN)} | "
            f"{triple(RECENT)} | {over} | {router} | {fits} | {when} |")


def replace_between(text: str, markers: tuple[str, str], body: str) -> str | None:
    begin, end = markers
    if begin not in text or end not in text:
        return None
    head, rest = text.split(begin, 1)
    return head + f"{begin}\n{body}\n{end}" + rest.split(end, 1)[1]


def merge_summary(old_block: str, rows: Mapping[str, str], order: Sequence[str]) -> str:
    """The summary table with this run's rows replacing the same shapes' rows, other shapes' rows kept."""
    kept = {line.split("|")[1].strip(): line for line in old_block.splitlines()
            if line.startswith("| ") and not line.startswith("| shape |")}
    kept.update(rows)
    return "\n".join([*SUMMARY_HEAD, *(kept[t] for t in order if t in kept)])


def write_docs(path: Path, sections: Mapping[str, str], rows: Mapping[str, str], order: Sequence[str],
               summary_path: Path | None = None) -> None:
    """Replace each shape's marked section in ``path`` and the summary's rows for the shapes run in
    ``summary_path`` (default: the same file); fail loudly, before writing either file, when a marker is missing,
    rather than append a section somewhere a reader would not look."""
    summary_path = summary_path or path
    text = path.read_text(encoding="utf-8")
    for name, body in sections.items():
        new = replace_between(text, SECTION_MARKERS[name], body)
        if new is None:
            raise SystemExit(f"{path}: markers {SECTION_MARKERS[name]} not found")
        text = new
    summary = text if summary_path == path else summary_path.read_text(encoding="utf-8")
    begin, end = SUMMARY_MARKERS
    if begin not in summary or end not in summary:
        raise SystemExit(f"{summary_path}: markers {SUMMARY_MARKERS} not found")
    old = summary.split(begin, 1)[1].split(end, 1)[0]
    summary = replace_between(summary, SUMMARY_MARKERS, merge_summary(old, rows, order)) or summary
    if summary_path == path:
        path.write_text(summary, encoding="utf-8")
        return
    path.write_text(text, encoding="utf-8")
    summary_path.write_text(summary, encoding="utf-8")
