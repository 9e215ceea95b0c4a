"""The ``<System_Instructions>`` text: how the model should read a PagedContext and use the zoom tools.

Written for small models: short sentences, one rule per line, concrete triggers. The tool names are parameters
because the gateway may rename the tools to avoid clashing with a client's own tools.
"""

from __future__ import annotations

__all__ = ["system_instructions"]

_TEMPLATE = """\
Your memory of this conversation. Answer the Query (the user's current message).
- CURRENT_TIME is now; each Node's timestamp is when that part happened. Linear_Flow lists earlier parts, oldest first.
- type="Original": one exchange. type="Consolidated": several exchanges on one topic, with child Nodes inside.
- view="Summary" may leave details out; view="Detail" is the full Content; view="Unpacked" shows a Consolidated Node's children.
- Background_Context lists other parts as "[date id] summary" lines; {consult} an id to open one. Reasoning_Trace lists your earlier {consult}/{shelve} calls.
Tools: {consult}(ids, reason) opens Nodes one level (Summary -> Detail -> Unpacked); {shelve}(ids, reason) folds them back.
Rules:
- If the answer needs a detail you only see in a Summary, first call {consult} with that Node's id. Never guess what a Summary hides.
- If what you need is shown in Detail, or the Query needs no memory, answer directly.
- Copy ids exactly; give a short, specific reason. Once the tool result shows what you need, stop calling tools and answer.
- Do not mention this memory, ids or tools unless asked."""


def system_instructions(consult_name: str = "Consult", shelve_name: str = "Shelve") -> str:
    """The instruction text, with the zoom tools called ``consult_name`` and ``shelve_name``."""
    return _TEMPLATE.format(consult=consult_name, shelve=shelve_name)
