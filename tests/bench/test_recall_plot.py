"""The recall plot is drawn from the benchmarks page's summary: every shape a run has written, with its baselines."""

from __future__ import annotations

from pathlib import Path

from bench.recall_plot import plot, summary_rows
from bench.recall_report import SUMMARY_HEAD, SUMMARY_MARKERS


def test_the_summary_table_gives_each_shape_its_methods_by_budget(tmp_path: Path) -> None:
    begin, end = SUMMARY_MARKERS
    page = "\n".join(["# Benchmarks", begin, *SUMMARY_HEAD,
                      "| LoCoMo | 1536 | 0.790 / 0.860 / 0.917 | 0.717 / 0.788 / 0.854 | 0.731 / 0.787 / 0.851 | "
                      "0.038 / 0.091 / 0.183 | 0 / 0 | 0.9 | — | then |",
                      "| REALTALK | 10 | 0.5 / 0.6 / 0.7 | not run | not run | not run | — | — | — | now |", end])
    rows = summary_rows(page)
    assert rows["LoCoMo"]["PCP Gateway"] == [0.790, 0.860, 0.917]
    assert rows["LoCoMo"]["recent turns"] == [0.038, 0.091, 0.183]
    assert rows["REALTALK"] == {"PCP Gateway": [0.5, 0.6, 0.7]}
    plot(rows, tmp_path / "recall.png")
    assert (tmp_path / "recall.png").stat().st_size > 5_000
