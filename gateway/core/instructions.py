"""The ``<System_Instructions>`` text: how the model should read a PagedContext and use the zoom tools.

Written for small models (short sentences, one rule per line, concrete triggers) and kept short: it is sent
with every request and counts against the budget, so each token here is one less for the memory. It explains
only what the context holds: the line on nodes when ``<Linear_Flow>`` has some, the line on
``<Background_Context>`` when it has entries, the trace when there is one (the budget counts each line with the
first element it explains, see :func:`instruction_costs`). The tool names are parameters because the gateway may
rename the tools to avoid clashing with a client's own tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["InstructionCosts", "instruction_costs", "system_instructions"]

_OPENING = "Your memory of this conversation, oldest first; CURRENT_TIME is now. Answer the Query (the user's current message)."
_NODES = (
    '- Node type="Original" is one exchange, type="Consolidated" a topic of several. view="Detail" is the full text, '
    'view="Summary" may leave details out, view="Unpacked" shows the children.'
)
_BACKGROUND = (
    '- Background_Context: other parts under their "date:" line, each "[id]" with its summary or its messages '
    'that match the Query ("…" = left out).'
)
_TRACE = "- Reasoning_Trace: your earlier tool calls."
_CONSULT = (
    "- If the Query is about something said before and the text shown does not state the answer, reply with only a "
    '{consult}(ids, reason) call with the id of the most related part ("…" marks hidden text); never guess.'
)
_SHELVE = " {shelve}(ids, reason) folds Nodes back."
_CLOSING = (
    "- Once a tool result shows the text, stop calling tools and answer the Query briefly. Answer the Query; never "
    "continue the conversation. Copy ids exactly. Do not mention this memory, ids or tools unless asked."
)


def system_instructions(
    consult_name: str = "Consult",
    shelve_name: str = "Shelve",
    *,
    nodes: bool = True,
    background: bool = True,
    trace: bool = True,
) -> str:
    """The instruction text, with the zoom tools called ``consult_name`` and ``shelve_name``, explaining nodes,
    background entries and the trace only where the context has them (all by default)."""
    lines = [_OPENING]
    if nodes:
        lines.append(_NODES)
    if background:
        lines.append(_BACKGROUND)
    if trace:
        lines.append(_TRACE)
    lines.append(_CONSULT.format(consult=consult_name) + (_SHELVE.format(shelve=shelve_name) if nodes else ""))
    lines.append(_CLOSING)
    return "\n".join(lines)


@dataclass(frozen=True)
class InstructionCosts:
    """What explaining an element adds to the instructions, in tokens: the budget charges it to the element's
    first entry (the first node, the first background entry)."""

    nodes: int
    background: int


def instruction_costs(count: Callable[[str], int], consult_name: str, shelve_name: str, *, trace: bool) -> InstructionCosts:
    """The tokens the node and the background lines add to the instructions (``count`` counts a text)."""
    def size(nodes: bool, background: bool) -> int:
        return count(system_instructions(consult_name, shelve_name, nodes=nodes, background=background, trace=trace))

    bare = size(False, False)
    return InstructionCosts(nodes=size(True, False) - bare, background=size(False, True) - bare)
