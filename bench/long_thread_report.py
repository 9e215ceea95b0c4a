"""The long-thread benchmark's measured steps and their report: the table, the plot and the summary it writes into
the docs (`bench.long_thread` measures them)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.recall_report import replace_between

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmark-results.md"
SUMMARY_DOCS = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "long-thread.png"
MARKERS = ("<!-- long-thread:begin -->", "<!-- long-thread:end -->")
SUMMARY_MARKERS = ("<!-- long-thread-summary:begin -->", "<!-- long-thread-summary:end -->")
MAP_BUDGET = 300  # the budget the thread's map is checked at: room for little more than the instructions


@dataclass
class Step:
    exchanges: int
    messages: int
    tokens: int  # cl100k, the history's messages as sent
    pages: int = 0
    questions: int = 0
    ingest_s: float = 0.0  # the first request's wall time
    ingest_cpu_s: float = 0.0
    drain_s: float = 0.0  # its background work, after the answer
    import_s: float | None = None
    cpu_ms: list[float] = field(default_factory=list)  # per question request
    wall_ms: list[float] = field(default_factory=list)
    decode_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)  # the gateway's CPU for the same body refused once parsed
    first_token_ms: list[float] = field(default_factory=list)
    redis_used_per_page: float = 0.0  # bytes
    redis_keys_per_page: float = 0.0  # bytes
    rss_mb: float = 0.0
    rss_start_mb: float = 0.0  # before the first request (0: not measured, a run before it was)
    recall: dict[str, float] = field(default_factory=dict)  # "gateway@2000", "bm25@2000", ...
    # per question at MAP_BUDGET: the share of the thread's top-level topics (containers) its context names, by an
    # entry of the map or a page of the topic shown (DESIGN §2 step 8: whatever the budget)
    map_named: list[float] = field(default_factory=list)
    map_topics: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def rss_kb_per_page(self) -> float | None:
        """The gateway's RSS gained since before the first request (after `Gateway.warm`), per stored page; None
        where not measured."""
        return (self.rss_mb - self.rss_start_mb) * 1024 / self.pages if self.rss_start_mb and self.pages else None

    @property
    def rate(self) -> float:
        return self.exchanges / self.ingest_s if self.ingest_s else 0.0


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def read_text(step: Step) -> str:
    """``R / ``: the p50 of the gateway's CPU for the step's bodies refused once parsed; ``— / `` where not measured."""
    return f"{quantile(step.read_ms, 0.5):.0f} / " if step.read_ms else "— / "


def rss_per_page(step: Step) -> str:
    """`` (KB)``: `Step.rss_kb_per_page`; empty if not measured."""
    per_page = step.rss_kb_per_page
    return f" ({per_page:.0f})" if per_page is not None else ""


# --- report -----------------------------------------------------------------------------------------------

HEAD = ("| exchanges | tokens | pages | ingest, first request: exchanges/s (tokens/s) | its CPU s | background drain s "
        "| import exchanges/s | paged request CPU ms p50 / p95 | the body, ms: the gateway reading it / json.loads | wall ms p50 / p95 | first token ms p50 "
        "| Redis per page, KB (keys / used_memory) | gateway RSS MB (KB per page) | recall @2k: gateway / BM25 chunks | recall @4k "
        f"| top-level topics named at {MAP_BUDGET} tokens |")


def row_text(s: Step) -> str:
    imported = f"{s.exchanges / s.import_s:.0f}" if s.import_s else "—"
    named = f"{statistics.mean(s.map_named) * s.map_topics:.1f} of {s.map_topics}" if s.map_named else "—"
    return (f"| {s.exchanges:,} | {s.tokens:,} | {s.pages:,} | {s.rate:.0f} ({s.tokens / max(s.ingest_s, 1e-9):,.0f}) "
            f"| {s.ingest_cpu_s:.1f} | {s.drain_s:.0f} | {imported} "
            f"| {quantile(s.cpu_ms, 0.5):.0f} / {quantile(s.cpu_ms, 0.95):.0f} | {read_text(s)}{quantile(s.decode_ms, 0.5):.0f} "
            f"| {quantile(s.wall_ms, 0.5):.0f} / {quantile(s.wall_ms, 0.95):.0f} | {quantile(s.first_token_ms, 0.5):.0f} "
            f"| {s.redis_keys_per_page / 1024:.1f} / {s.redis_used_per_page / 1024:.1f} | {s.rss_mb:.0f}{rss_per_page(s)} "
            f"| {s.recall.get('gateway@2000', 0):.3f} / {s.recall.get('bm25@2000', 0):.3f} "
            f"| {s.recall.get('gateway@4000', 0):.3f} / {s.recall.get('bm25@4000', 0):.3f} "
            f"| {named} |")


def table(steps: Sequence[Step]) -> str:
    return "\n".join([HEAD, "|" + "---:|" * HEAD.count(" | ") + "---:|", *(row_text(s) for s in steps)])


def plot(steps: Sequence[Step], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s.tokens / 1000 for s in steps]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    ax.plot(x, [quantile(s.cpu_ms, 0.5) for s in steps], "o-", label="paged request CPU p50")
    ax.plot(x, [quantile(s.decode_ms, 0.5) for s in steps], "s--", label="json.loads of the body (est.)")
    if all(s.read_ms for s in steps):
        ax.plot(x, [quantile(s.read_ms, 0.5) for s in steps], "^:", label="the gateway reading the body")
    ax.set_ylabel("ms per request")
    ax.set_title("CPU per paged request")
    ax.legend(fontsize=8)
    ax = axes[1]
    for key, style in (("gateway@4000", "o-"), ("bm25@4000", "s--"), ("gateway@2000", "o:"), ("bm25@2000", "s:")):
        ax.plot(x, [s.recall.get(key, 0.0) for s in steps], style, label=key.replace("bm25", "BM25 chunks"))
    ax.set_ylim(0, 1)
    ax.set_title("evidence recall")
    ax.legend(fontsize=8)
    ax = axes[2]
    ax.plot(x, [s.redis_keys_per_page / 1024 for s in steps], "o-", label="Redis KB per page (its keys)")
    ax.plot(x, [s.rate for s in steps], "s--", label="ingest exchanges/s (first request)")
    ax.set_title("memory and ingest")
    ax.legend(fontsize=8)
    for ax in axes:
        ax.set_xlabel("thread size, thousand tokens")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(steps: Sequence[Step], meta: str, before: Sequence[Step] = (), before_note: str = "") -> str:
    lines = [meta, "", table(steps), "", f"![the long thread by size]({PLOT.name})"]
    if before:
        lines += ["", before_note or "An earlier run, for comparison:", "", table(before)]
    return "\n".join(lines)


def memory(step: Step) -> str:
    """``, the gateway ... KB per page``: its RSS gained over the step's pages, where measured."""
    per_page = step.rss_kb_per_page
    return f", the gateway process {per_page:.0f} KB ({step.rss_mb:,.0f} MB in all)" if per_page is not None else ""


def summary(steps: Sequence[Step]) -> str:
    small, large = steps[0], steps[-1]
    growth = quantile(large.cpu_ms, 0.5) / max(quantile(small.cpu_ms, 0.5), 1e-9)
    past = ""
    if small.read_ms and large.read_ms:
        beyond = [quantile(s.cpu_ms, 0.5) - quantile(s.read_ms, 0.5) for s in (small, large)]
        past = (f", {beyond[1] / max(beyond[0], 1e-9):.2f}× past reading the body ({quantile(large.read_ms, 0.5):.0f} and "
                f"{quantile(small.read_ms, 0.5):.0f} ms: the same body refused once parsed)")
    return (f"On one thread of {large.exchanges:,} exchanges ({large.tokens:,} tokens), a paged request costs "
            f"{quantile(large.cpu_ms, 0.5):.0f} ms of gateway CPU (p50, from its CPU-time clock), {growth:.2f}× the "
            f"{quantile(small.cpu_ms, 0.5):.0f} ms at {small.exchanges:,} exchanges ({len(small.cpu_ms)} requests){past} (`json.loads` of "
            f"its whole body takes "
            f"{quantile(large.decode_ms, 0.5):.0f} ms here; the gateway reads a body on from the thread's last one, "
            f"[0026](decisions/0026-a-body-read-on-from-the-last.md)); evidence recall at 4k "
            f"{large.recall.get('gateway@4000', 0):.3f} against {large.recall.get('bm25@4000', 0):.3f} for BM25 chunks; "
            f"Redis holds {large.redis_keys_per_page / 1024:.1f} KB per page{memory(large)}. The table and plot: "
            f"[benchmark results](benchmark-results.md#a-year-of-conversation-one-long-thread).")


def write_docs(steps: Sequence[Step], meta: str, docs: Path = DOCS, summary_docs: Path = SUMMARY_DOCS,
               plot_path: Path = PLOT, before: Sequence[Step] = (), before_note: str = "") -> None:
    for path, markers, body in ((docs, MARKERS, section(steps, meta, before, before_note)),
                                (summary_docs, SUMMARY_MARKERS, summary(steps))):
        text = path.read_text(encoding="utf-8")
        new = replace_between(text, markers, body)
        if new is None:
            raise SystemExit(f"{path}: markers {markers} not found")
        path.write_text(new, encoding="utf-8")
    plot(steps, plot_path)
