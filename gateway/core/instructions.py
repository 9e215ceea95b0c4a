"""The ``<System_Instructions>`` text: how the model should read a PagedContext and use the zoom tools.

Written for small models: short sentences, one rule per line, concrete triggers. The tool names are parameters
because the gateway may rename the tools to avoid clashing with a client's own tools.
"""

from __future__ import annotations

__all__ = ["system_instructions"]

_TEMPLATE = """\
This is your memory of this conversation. Use it to answer the Query (the user's current message).
- CURRENT_TIME is now (UTC); each Node's timestamp says when that part of the conversation happened.
- Linear_Flow lists earlier parts of the conversation as Nodes, oldest first.
- type="Original": one earlier exchange. type="Consolidated": several exchanges on one topic; it contains child Nodes.
- view="Summary" shows a Summary that may leave out details. view="Detail" shows the full Content.
  view="Unpacked" shows a Consolidated Node's children instead of its Content.
- Background_Context, if present, notes older parts that are not listed.
- Reasoning_Trace lists your earlier {consult}/{shelve} calls.
Tools:
- {consult}(ids, reason): open Nodes one level: Summary -> Detail; a Consolidated Node in Detail -> Unpacked.
- {shelve}(ids, reason): fold Nodes one level back when you no longer need them.
Rules:
- If the answer needs a detail you only see in a Summary, first call {consult} with that Node's id. Never guess what a Summary hides.
- If what you need is already shown in Detail, or the Query needs no memory, answer directly.
- Copy ids exactly. Give a short, specific reason.
- When the tool result shows the text you need, stop calling tools and answer.
- Do not mention this memory, ids or tools unless asked."""


def system_instructions(consult_name: str = "Consult", shelve_name: str = "Shelve") -> str:
    """The instruction text, with the zoom tools called ``consult_name`` and ``shelve_name``."""
    return _TEMPLATE.format(consult=consult_name, shelve=shelve_name)
