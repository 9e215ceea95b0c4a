"""The recall plot of the benchmarks page: recall by budget, one panel per conversation shape, the gateway against
its baselines. Drawn from the summary table of ``docs/benchmarks.md`` (so every shape a run has ever written is in
it, not only the shapes of the last run); ``bench.evidence_recall --write-docs`` redraws it after each run.

    .venv/bin/python -m bench.recall_plot      # redraw docs/recall.png from the page as it is
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.recall_report import SUMMARY_MARKERS  # noqa: E402

SUMMARY_DOCS = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "recall.png"
BUDGETS = (1000, 2000, 4000)  # the summary's columns: @1k / @2k / @4k
METHODS = {2: "PCP Gateway", 3: "BM25 chunks", 4: "BM25 chunks ≤256", 5: "recent turns"}  # column -> label


def summary_rows(text: str) -> dict[str, dict[str, list[float]]]:
    """shape -> method -> recall at each budget, from the page's summary table (shapes not run are left out)."""
    begin, end = SUMMARY_MARKERS
    if begin not in text or end not in text:
        raise SystemExit(f"the summary markers {SUMMARY_MARKERS} are not in the page")
    rows: dict[str, dict[str, list[float]]] = {}
    for line in text.split(begin, 1)[1].split(end, 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 6 or cells[0] in ("shape", "") or cells[0].startswith("---"):
            continue
        methods = {}
        for column, label in METHODS.items():
            try:
                methods[label] = [float(v) for v in cells[column].split("/")]
            except ValueError:  # "not run"
                continue
        if methods:
            rows[cells[0]] = methods
    return rows


def plot(rows: dict[str, dict[str, list[float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(3, max(1, len(rows)))
    lines = -(-len(rows) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5 * columns, 3.6 * lines), squeeze=False, sharey=True)
    styles = {"PCP Gateway": ("o", 2.5), "BM25 chunks": ("s", 1.2), "BM25 chunks ≤256": ("^", 1.2), "recent turns": ("x", 1.2)}
    for ax, (shape, methods) in zip(axes.flat, rows.items()):
        for label, values in methods.items():
            marker, width = styles[label]
            ax.plot(BUDGETS[: len(values)], values, marker=marker, linewidth=width, label=label)
        ax.set_title(shape, fontsize=10)
        ax.set_xticks(BUDGETS)
        ax.set_xticklabels(["1k", "2k", "4k"])
        ax.set_xlabel("token budget")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(rows):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("evidence recall")
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> int:
    plot(summary_rows(SUMMARY_DOCS.read_text(encoding="utf-8")), PLOT)
    print(f"wrote {PLOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
