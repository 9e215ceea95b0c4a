"""The ``<System_Instructions>`` text: how the model should read a PagedContext and use the zoom tools.

Written for small models (short sentences, one rule per line, concrete triggers) and kept short: it is sent
with every request and counts against the budget, so each token here is one less for the memory. The tool names
are parameters because the gateway may rename the tools to avoid clashing with a client's own tools.
"""

from __future__ import annotations

__all__ = ["system_instructions"]

_TEMPLATE = """\
Your memory of this conversation, oldest first; CURRENT_TIME is now. Answer the Query (the user's current message).
- Node type="Original" is one exchange, type="Consolidated" a topic of several. view="Detail" is the full text, view="Summary" may leave details out, view="Unpacked" shows the children.
- Background_Context: other parts under their "date:" line, each "[id]" with its summary or its messages that match the Query ("…" = left out). Reasoning_Trace: your earlier tool calls.
- If the Query is about something said before and the text shown does not state the answer, reply with only a {consult}(ids, reason) call with the id of the most related part ("…" marks hidden text); never guess. {shelve}(ids, reason) folds Nodes back.
- Once a tool result shows the text, stop calling tools and answer the Query briefly. Answer the Query; never continue the conversation. Copy ids exactly. Do not mention this memory, ids or tools unless asked."""


def system_instructions(consult_name: str = "Consult", shelve_name: str = "Shelve") -> str:
    """The instruction text, with the zoom tools called ``consult_name`` and ``shelve_name``."""
    return _TEMPLATE.format(consult=consult_name, shelve=shelve_name)
