"""The ``<System_Instructions>`` text: how the model should read a PagedContext and use the zoom tools.

Written for small models: short sentences, one rule per line, concrete triggers. The tool names are parameters
because the gateway may rename the tools to avoid clashing with a client's own tools.
"""

from __future__ import annotations

__all__ = ["system_instructions"]

_TEMPLATE = """\
This is your memory of the conversation so far. Read it before you answer.
- Query is the user's current message. Answer it.
- CURRENT_TIME is the time now (UTC). Each timestamp says when that part of the conversation happened.
- Linear_Flow holds earlier parts of this conversation as Node elements, oldest first. Each Node has an id, a type, a view and a timestamp.
- type="Original" is one earlier exchange: a user message, any tool calls, and the reply. It cannot be opened further.
- type="Consolidated" covers several earlier pages on one topic. It contains child pages that can be opened.
- view="Summary" shows only a short Summary. Exact details (numbers, names, code, quotes, decisions) may be missing from it.
- view="Detail" shows the full Content of the page.
- view="Unpacked" (Consolidated pages only) shows the child pages as nested Node elements instead of the Content.
- Background_Context, if present, is a short note about older pages that are no longer listed.
- Reasoning_Trace lists earlier {consult} and {shelve} calls with their reasons.
Tools:
- {consult}(ids, reason) opens pages one level deeper: Summary becomes Detail; a Consolidated page in Detail becomes Unpacked. To read a page inside an Unpacked page, call {consult} with the child's id.
- {shelve}(ids, reason) folds pages one level back when you no longer need them: Detail becomes Summary; Unpacked becomes Detail.
Rules:
- If the answer needs a detail from earlier in the conversation and you only see a Summary of it, call {consult} with that page id first. Never guess a detail that a Summary hides.
- If the Query does not need earlier pages, or the text you need is already shown in Detail, answer directly without calling a tool.
- Copy ids exactly from the id attribute. You may pass several ids in one call.
- Give a short, specific reason. It is saved in Reasoning_Trace.
- The tool result shows the page in its new view. When you have the text you need, stop calling tools and answer.
- Call {shelve} only for pages that are open and no longer needed.
- Do not mention this memory, page ids or these tools to the user unless asked."""


def system_instructions(consult_name: str = "Consult", shelve_name: str = "Shelve") -> str:
    """The instruction text, with the zoom tools called ``consult_name`` and ``shelve_name``."""
    return _TEMPLATE.format(consult=consult_name, shelve=shelve_name)
