"""The documentation: a README a new user reads in minutes, a site (docs/, mkdocs.yml) where every section of the old
one-page README can still be found, and the benchmark pages' markers where the benchmark commands write.

`mkdocs build --strict` (run by .ci/run) checks links and anchors inside the site; these tests need no mkdocs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bench import answers, evidence_recall, long_thread_report, overhead, recall_plot
from bench.recall_report import SECTION_MARKERS, SUMMARY_MARKERS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# Every heading of the README before it became a front page (issue 46), and where the site now has it.
OLD_HEADINGS = {
    "PCP Gateway": "index.md",
    "Quick start": "getting-started.md",
    "No API key: a local model": "getting-started.md",
    "Pointing a client at it": "clients.md",
    "Coding assistants": "clients.md",
    "Responses API (OpenAI SDK, Codex CLI)": "clients.md",
    "Messages API (Anthropic SDK, Claude Code)": "clients.md",
    "HTTP interface": "api.md",
    "Keys and tenants": "operations.md",
    "Operating it": "operations.md",
    "Paged memory": "paged-memory.md",
    "Relevance: which pages, in which view": "paged-memory.md",
    "Consolidation (background)": "paged-memory.md",
    "Configuration reference": "configuration.md",
    "CLI": "operations.md",
    "Several gateways and workers (one Redis or a Redis Cluster)": "operations.md",
    "Importing and exporting conversations": "operations.md",
    "Memory inspector page": "operations.md",
    "Benchmarks": "benchmarks.md",
    "Docker": "operations.md",
    "Layout": "development.md",
    "Status": "index.md",
}


def headings(text: str) -> list[str]:
    """The Markdown headings of a page, outside code blocks."""
    found, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def nav_pages() -> set[str]:
    def walk(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for value in node.values() for p in walk(value)]
        if isinstance(node, list):
            return [p for item in node for p in walk(item)]
        return []

    return set(walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))


def test_every_heading_of_the_old_readme_is_a_heading_of_the_site() -> None:
    for heading, page in OLD_HEADINGS.items():
        assert page in nav_pages(), page
        assert heading in headings((DOCS / page).read_text(encoding="utf-8")), f"{heading!r} is not a heading of docs/{page}"


def test_every_page_of_docs_is_in_the_site_nav() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == nav_pages()


def test_the_readme_fits_on_a_few_screens_with_short_paragraphs() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    paragraph: list[str] = []
    fenced = False
    for line in [*lines, ""]:
        if line.startswith("```"):
            fenced = not fenced
            continue
        starts = not line.strip() or line.startswith(("#", "|", "- ", "<!--")) or fenced
        if starts and paragraph:
            assert len(paragraph) <= 6, f"a README paragraph of {len(paragraph)} lines: {paragraph[0]!r}"
            paragraph = []
        if not fenced and line.strip() and not line.startswith(("#", "|", "<!--")):
            paragraph.append(line)


def test_the_readme_keeps_the_two_commands_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    assert "<!-- ci:setup-and-start -->\n```sh\nscripts/setup && .venv/bin/pcp-gateway serve\n```" in text
    assert "<!-- ci:test -->\n```sh\nscripts/setup && .venv/bin/python -m pytest\n```" in text


def test_the_readme_links_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert targets
    for target in targets:
        assert (ROOT / target).exists(), target


def test_the_benchmark_pages_hold_every_marker_the_benchmarks_write() -> None:
    summary = recall_plot.SUMMARY_DOCS.read_text(encoding="utf-8")
    assert evidence_recall.SUMMARY_DOCS == recall_plot.SUMMARY_DOCS == DOCS / "benchmarks.md"
    assert all(marker in summary for marker in SUMMARY_MARKERS)
    assert len(summary.splitlines()) <= 300
    results = evidence_recall.DOCS.read_text(encoding="utf-8")
    for name, markers in SECTION_MARKERS.items():
        assert all(results.count(marker) == 1 for marker in markers), name
    assert all(overhead.DOCS.read_text(encoding="utf-8").count(marker) == 1 for marker in overhead.MARKERS)
    assert all(answers.DOCS.read_text(encoding="utf-8").count(marker) == 1 for marker in answers.MARKERS)
    assert recall_plot.PLOT.exists() and overhead.PLOT.exists()
    assert all(long_thread_report.DOCS.read_text(encoding="utf-8").count(marker) == 1 for marker in long_thread_report.MARKERS)
    assert all(long_thread_report.SUMMARY_DOCS.read_text(encoding="utf-8").count(marker) == 1 for marker in long_thread_report.SUMMARY_MARKERS)
