"""The PCP v1.0 renderer: a pure function from pages, views, trace, query and time to the ``<PagedContext>`` XML.

Contracts:

* The tags and attributes are exactly those of PCP v1.0 (DESIGN §4).
* Same input, same bytes: nodes are ordered by (timestamp, id), attributes in a fixed order, indentation fixed.
* All text goes through lxml, so user text can never open, close or forge an element. Characters that XML 1.0
  forbids (control characters, U+FFFE/U+FFFF, lone surrogates) are replaced by U+FFFD (:func:`xml_safe`);
  parsing the output gives back every text exactly, after that replacement.
* Timestamps are UTC in ISO 8601 at seconds precision with a ``Z`` suffix; naive datetimes are taken as UTC.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from lxml import etree  # type: ignore[import-untyped,unused-ignore]

from gateway.core.excerpt import shown_content
from gateway.core.extract import lead_text
from gateway.core.instructions import system_instructions
from gateway.core.pages import Page, PageType, utc
from gateway.core.trace import Step
from gateway.core.views import PageTree, View, ViewState, view_of

__all__ = [
    "BACKGROUND_LINE_CAP",
    "LineHolds",
    "MAP_HEADING",
    "NodeSpec",
    "RenderInput",
    "background_line",
    "background_lines",
    "excerpt_entry",
    "summary_fits_line",
    "iso_time",
    "line_holds",
    "map_text",
    "nodes_from_state",
    "render_context",
    "render_node",
    "shown_page",
    "step_text",
    "xml_safe",
]

PCP_VERSION = "1.0"
BACKGROUND_LINE_CAP = 600  # characters of a folded page's summary kept on its line
_ILLEGAL_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _ILLEGAL_XML.sub("\ufffd", text)


def iso_time(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class NodeSpec:
    """One ``<Node>`` to render: a page in a view; ``children`` only (and required) when Unpacked."""

    page: Page
    view: View
    children: tuple[NodeSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.view is View.UNPACKED and self.page.type is not PageType.CONSOLIDATED:
            raise ValueError(f"page {self.page.id}: only a Consolidated page can be Unpacked")
        if self.view is not View.UNPACKED and self.children:
            raise ValueError(f"page {self.page.id}: children are rendered only in the Unpacked view")


@dataclass(frozen=True)
class RenderInput:
    """Everything one ``<PagedContext>`` depends on. ``background`` lines are joined with newlines."""

    now: datetime
    query: str
    steps: tuple[Step, ...] = ()
    background: tuple[str, ...] | str = ()
    nodes: tuple[NodeSpec, ...] = ()
    consult_name: str = "Consult"
    shelve_name: str = "Shelve"


def _ordered(nodes: Iterable[NodeSpec]) -> list[NodeSpec]:
    return sorted(nodes, key=lambda node: (node.page.timestamp, node.page.id))


def _text(parent: etree._Element, tag: str, text: str) -> None:
    etree.SubElement(parent, tag).text = xml_safe(text)


def _node_element(node: NodeSpec) -> etree._Element:
    page = node.page
    element = etree.Element("Node")
    element.set("id", xml_safe(page.id))
    element.set("type", page.type.value)
    element.set("view", node.view.value)
    element.set("timestamp", iso_time(page.timestamp))
    if node.view is View.SUMMARY:
        _text(element, "Summary", page.summary)
    elif node.view is View.DETAIL:
        _text(element, "Content", page.content)
    else:
        for child in _ordered(node.children):
            element.append(_node_element(child))
    return element


def _serialize(element: etree._Element) -> str:
    return str(etree.tostring(element, encoding="unicode"))  # no indentation: it costs tokens on every node


def _step_element(step: Step) -> etree._Element:
    element = etree.Element("Step")
    element.set("action", xml_safe(step.action))
    element.set("target", xml_safe(step.target))
    element.set("reason", xml_safe(step.reason))
    return element


def step_text(step: Step) -> str:
    """One ``<Step>`` of the trace as the context shows it (what it costs there)."""
    return _serialize(_step_element(step))


def render_node(node: NodeSpec) -> str:
    """One ``<Node>`` (with nested children when Unpacked) as a standalone XML string."""
    return _serialize(_node_element(node))


def render_context(data: RenderInput) -> str:
    """The full ``<PagedContext version="1.0">`` document for ``data``."""
    root = etree.Element("PagedContext")
    root.set("version", PCP_VERSION)
    registry = etree.SubElement(root, "Static_Registry")
    clock = etree.SubElement(registry, "ST-Node")
    clock.set("id", "CURRENT_TIME")
    clock.set("value", iso_time(data.now))
    background = data.background if isinstance(data.background, str) else "\n".join(data.background)
    instructions = system_instructions(
        data.consult_name, data.shelve_name, nodes=bool(data.nodes), background=bool(background), trace=bool(data.steps)
    )
    _text(registry, "System_Instructions", instructions)
    _text(root, "Query", data.query)
    trace = etree.SubElement(root, "Reasoning_Trace")
    for step in data.steps:
        trace.append(_step_element(step))
    if background:
        _text(root, "Background_Context", background)
    flow = etree.SubElement(root, "Linear_Flow")
    for node in _ordered(data.nodes):
        flow.append(_node_element(node))
    return _serialize(root)


def background_line(page: Page) -> str:
    """The line a page leaves in ``<Background_Context>`` once folded: its id (so the model can still consult
    it) and its summary on one line — whole when it fits :data:`BACKGROUND_LINE_CAP`, else its lead. Its date
    heads the lines of its day (:func:`background_lines`)."""
    return f"[{page.id}] {lead_text(page.summary, BACKGROUND_LINE_CAP)}"


MAP_HEADING = "other topics:"  # heads the thread's map in <Background_Context>: the topics no line or node shows


def background_lines(pages: Iterable[Page], excerpts: Mapping[str, str] | None = None, mapped: Collection[str] = ()) -> tuple[str, ...]:
    """The ``<Background_Context>`` entries of ``pages`` (in time order): a ``YYYY-MM-DD:`` line before each
    day's entries, then one entry per page — its :func:`background_line`, or, for a page in ``excerpts``,
    ``[id]`` followed by that excerpt (its rows verbatim, ``…`` where something was left out). A date written
    once per day instead of on every line leaves room for more entries. The pages in ``mapped`` are the thread's
    map (their excerpts its entries, :func:`map_text`): they come first, under :data:`MAP_HEADING`, not under
    their days (an entry names a topic, whatever day it began)."""
    lines: list[str] = []
    day = ""
    chosen = excerpts or {}
    if mapped:
        pages = list(pages)
        lines.append(MAP_HEADING)
        lines += [excerpt_entry(page.id, chosen[page.id]) for page in pages if page.id in mapped]
        pages = [page for page in pages if page.id not in mapped]
    for page in pages:
        heading = f"{utc(page.timestamp):%Y-%m-%d}:"
        if heading != day:
            lines.append(heading)
            day = heading
        excerpt = chosen.get(page.id)
        lines.append(background_line(page) if excerpt is None else excerpt_entry(page.id, excerpt))
    return tuple(lines)


MAP_WORDS = 3  # a map entry's keywords: the container's first clusters
MAP_CHARACTERS = 40  # a map entry's words when the container has no clusters: its summary's lead


def map_text(page: Page) -> str:
    """What a container's entry in the thread's map says after its id: its first keywords (``clusters``), a few
    tokens that name the topic so that the model can Consult it (DESIGN §2 step 8); its summary's lead without any."""
    return ", ".join(page.clusters[:MAP_WORDS]) or lead_text(page.summary, MAP_CHARACTERS)


def excerpt_entry(page_id: str, excerpt: str) -> str:
    """A page's excerpt as a ``<Background_Context>`` entry: its id, then the excerpt's rows."""
    return f"[{page_id}] {excerpt}"


def summary_fits_line(page: Page) -> bool:
    """Whether :func:`background_line` carries ``page``'s whole summary (a Summary node would add only tags)."""
    # the raw length settles almost every page without a copy
    return len(page.summary) <= BACKGROUND_LINE_CAP or len(" ".join(page.summary.split())) <= BACKGROUND_LINE_CAP


class LineHolds(enum.Enum):
    """What a page's :func:`background_line` carries whole."""

    LEAD = "lead"  # only the opening of the summary
    SUMMARY = "summary"  # the whole summary: a Summary node would add only its tags
    CONTENT = "content"  # every message of the page, verbatim: a Detail node would add only its tags


_LINE_ROLES = ("user: ", "assistant: ")


def line_holds(page: Page) -> LineHolds:
    """What ``page``'s line carries (``page`` with its content). An Original page's line holds its content when
    each transcript row is a plain ``user:`` / ``assistant:`` message whose text is on the line verbatim: a
    short chat exchange without tools, names or line breaks, under the extractive summary. Computed once, when
    the page or its summary is stored, never per request."""
    line = background_line(page)
    rows = page.content.split("\n") if page.type is PageType.ORIGINAL and page.content else []
    if rows and all(row.startswith(_LINE_ROLES) and row.partition(": ")[2] in line for row in rows):
        return LineHolds.CONTENT
    return LineHolds.SUMMARY if summary_fits_line(page) else LineHolds.LEAD


def shown_page(page: Page, sides: Mapping[str, str]) -> Page:
    """``page`` as a Detail node shows it: an exchange's content as its excerpts show its rows
    (:func:`gateway.core.excerpt.shown_content`: by the names a two-person chat's sides are shown by, ``sides``, or
    its own labels); any other page as stored."""
    if page.type is not PageType.ORIGINAL:
        return page
    content = shown_content(page.content, sides)
    return page if content == page.content else replace(page, content=content)


def nodes_from_state(
    tree: PageTree,
    state: ViewState,
    pages: Mapping[str, Page],
    roots: Iterable[str] | None = None,
    overrides: Mapping[str, View] | None = None,
    shown: Callable[[Page], Page] | None = None,
) -> tuple[NodeSpec, ...]:
    """The node specs for ``roots`` (default: all of ``tree.roots``) in their views from ``state``.

    ``overrides`` (e.g. the views chosen by the budget) replace the view of the listed pages; a page demoted
    from Unpacked shows no children; ``shown`` gives the page a Detail node shows (e.g. :func:`shown_page`). Every id
    reached must be in ``pages``; an Unpacked page needs children.
    """
    chosen = dict(overrides or {})

    def build(page_id: str) -> NodeSpec:
        view = chosen.get(page_id, view_of(state, page_id))
        if view is View.UNPACKED and not tree.kids(page_id):
            view = View.DETAIL
        children = tuple(build(child) for child in tree.kids(page_id)) if view is View.UNPACKED else ()
        page = pages[page_id]
        return NodeSpec(shown(page) if shown is not None and view is View.DETAIL else page, view, children)

    return tuple(build(page_id) for page_id in (tree.roots if roots is None else roots))
