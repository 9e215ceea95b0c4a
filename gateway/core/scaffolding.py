"""Scaffolding: which Logical Blocks of a request are the client's per-request scaffolding, not conversation.

Coding assistants re-send, at fixed places in every request, messages that are not the conversation: few-shot
example exchanges, a repository map, the current contents of the files in the chat, each answered by a canned
acknowledgement (aider: "I have *added these files to the chat*…" → "Ok, any changes I propose will be to those
files."). Such blocks belong to the skeleton, verbatim and in their place, like the system prompt. Paged, the
examples would be stored and consolidated as memory of the conversation, and the budget could fold the file the
model is editing to one line.

The decision, :func:`scaffolding_blocks`, is structural, anchored on the client's own markers from the config:

* **pinned** (``pcp.pin``): a block whose user text matches a pin is scaffolding, wherever it sits (aider puts its
  file block between the earlier conversation and the latest exchanges). The client replaces such a block rather
  than extending it, so only the copy in the current request is ever shown: an updated file never shows twice.
* **preamble** (``pcp.pin_preamble``): the first block matching a preamble marker closes the client's preamble;
  it and every block before it are scaffolding (aider ends its few-shot examples with "I switched to a new code
  base…" → "Ok."). Only a closed preamble counts: every block up to the marker must be one plain exchange, one
  user message answered by one assistant message without tool calls, as examples are. A conversation with tool
  calls before a stray marker is never taken for a preamble.

Without markers nothing is scaffolding. By their shape alone, a client's examples cannot be told from an imported
conversation (both are plain exchanges re-sent in every request, and position does not say where one ends), so
the client's own, fixed wording anchors the rule; position and shape then decide the rest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gateway.core.blocks import Block
from gateway.core.messages import tool_calls_of

__all__ = ["compile_pins", "is_plain_exchange", "scaffolding_blocks"]


def compile_pins(patterns: Iterable[str]) -> tuple[re.Pattern[str], ...]:
    """The pin patterns compiled; raises ``re.error`` naming the first one that is not a regular expression."""
    return tuple(re.compile(pattern) for pattern in patterns)


def is_plain_exchange(block: Block) -> bool:
    """One user message answered by one assistant message without tool calls: the shape of an example."""
    if len(block.messages) != 2:
        return False
    asked, answered = block.messages
    return asked.get("role") == "user" and answered.get("role") == "assistant" and not tool_calls_of(answered)


def _matches(block: Block, patterns: Sequence[re.Pattern[str]]) -> bool:
    return bool(block.anchor_text) and any(pattern.search(block.anchor_text) for pattern in patterns)


def scaffolding_blocks(
    blocks: Sequence[Block], pins: Sequence[re.Pattern[str]], preamble: Sequence[re.Pattern[str]] = ()
) -> frozenset[int]:
    """Positions in ``blocks`` of the client's scaffolding: the pinned blocks, and the closed preamble up to the
    first block matching a ``preamble`` marker (see the module docstring). Every other block is conversation."""
    found = set(index for index, block in enumerate(blocks) if _matches(block, pins))
    marker = next((index for index, block in enumerate(blocks) if _matches(block, preamble)), None)
    if marker is not None and all(is_plain_exchange(blocks[i]) for i in range(marker + 1)):
        found.update(range(marker + 1))
    return frozenset(found)
