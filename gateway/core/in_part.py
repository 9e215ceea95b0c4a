"""What a Consult opens when the page it names is too large for the room its request has left: a page *in part*.

:mod:`gateway.core.rounds` decides when (the room, the first page of a round, the budget); this module decides what,
from the page and the words that asked for it (the live turn and the Consult's reason), without any IO:

- :func:`container_in_part`: a consolidated page Unpacked in part. Its children that best match those words (BM25 over
  their text) are Summary nodes, as many as fit and one at least, and the tool result lists the others by id, with
  the start of each one's summary (:data:`LISTED_LEAD`) when there is room for the lines and by id alone when there
  is not: every child stays one Consult away.
- :func:`exchange_in_part`: an exchange in Detail in part. Its messages, lines or sentences that match those words
  (:func:`gateway.core.excerpt.excerpt_options`; its opening units when none match), as many as fit, ``…`` for
  the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from gateway.core.excerpt import excerpt_options, leading_options, units_of
from gateway.core.extract import lead_text
from gateway.core.lexical import bm25, term_counts, terms
from gateway.core.pages import Page
from gateway.core.render import NodeSpec, render_node
from gateway.core.views import View

__all__ = ["LISTED_LEAD", "container_in_part", "exchange_in_part"]

LISTED_LEAD = 80  # characters of a child's summary on its line when an Unpacked node lists it instead of showing it


def container_in_part(
    container: Page, kids: Sequence[Page], left: int, count: Callable[[str], int], asked: str
) -> tuple[tuple[str, ...], list[str], int]:
    """How to open ``container`` Unpacked within ``left`` tokens, ``kids`` its children (one at least, in conversation
    order, each shown in Summary): the ids of the children it shows as nodes (at least the best one for ``asked``,
    the words that asked for it), the text that lists the others, and what the node and that text cost together
    (each counted with ``count``)."""
    ids = [kid.id for kid in kids]
    counts = [term_counts(f"{kid.summary}\n{kid.content}") for kid in kids]
    scores = bm25(terms(asked), counts, [sum(c.values()) for c in counts])
    best = [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])]  # ties in conversation order
    summaries = {kid.id: NodeSpec(kid, View.SUMMARY) for kid in kids}
    nodes = {kid: count(render_node(node)) for kid, node in summaries.items()}
    lines = {kid.id: f"[{kid.id}] {lead_text(kid.summary, LISTED_LEAD)}" for kid in kids}
    line_cost = {kid: count(text) + 1 for kid, text in lines.items()}
    head = f"{container.id}: {{}} of its {len(ids)} pages are shown; the others, which you may Consult:"

    def opening(shown: Sequence[str], full: bool) -> tuple[tuple[str, ...], list[str], int]:
        order = tuple(kid for kid in ids if kid in shown)  # the node shows them in conversation order
        rest = [kid for kid in ids if kid not in shown]
        listing = [head.format(len(order)) + "\n" + "\n".join(lines[kid] if full else f"[{kid}]" for kid in rest)] if rest else []
        node = render_node(NodeSpec(container, View.UNPACKED, tuple(summaries[kid] for kid in order)))
        return order, listing, count(node) + sum(count(text) + 1 for text in listing)

    wrapper = count(render_node(NodeSpec(container, View.UNPACKED)))
    shown = best[:1]
    estimate = wrapper + count(head) + 1 + nodes[best[0]] + sum(line_cost[kid] for kid in best[1:])
    for kid in best[1:]:
        if estimate - line_cost[kid] + nodes[kid] > left:
            break
        shown.append(kid)
        estimate += nodes[kid] - line_cost[kid]
    chosen = opening(shown, True)
    while chosen[2] > left and len(shown) > 1:  # the estimate adds up counts of parts: the whole may differ a little
        shown.pop()
        chosen = opening(shown, True)
    return chosen if chosen[2] <= left else min(chosen, opening(shown, False), key=lambda option: option[2])


def exchange_in_part(
    page: Page, bound: int, count: Callable[[str], int], asked: str, names: Mapping[str, str] = MappingProxyType({})
) -> tuple[str, int] | None:
    """``page`` in Detail in part within ``bound`` tokens for ``asked``, the words that asked for it: the text its
    node shows and what the node costs (the smallest such excerpt when none fits), or None when no excerpt is
    smaller than the page. ``names``: the names a two-person chat's sides are shown by (its excerpts')."""
    units = units_of(page.content, count, names)
    weights = dict.fromkeys(terms(asked), 1.0)
    options = [o for o in excerpt_options(units, weights, count) or leading_options(units, count) if o.tokens < page.tokens]
    if not options:
        return None
    tags = count(render_node(NodeSpec(replace(page, content=""), View.DETAIL)))
    fitting = [o for o in options if tags + o.tokens <= bound] or options[:1]
    text = fitting[-1].text
    return text, count(render_node(NodeSpec(replace(page, content=text), View.DETAIL)))
