"""The core's error tree.

Every error raised by ``gateway.core`` derives from :class:`CoreError`. Expected, model-facing problems
(unknown page ids, impossible zoom moves, malformed tool arguments) are *not* errors: they come back as
plain-language result values. Exceptions are kept for broken invariants and for inputs the gateway cannot serve.
"""

from __future__ import annotations

__all__ = ["CoreError", "IllegalTransition", "InvalidMessage", "ContextWindowExceeded"]


class CoreError(Exception):
    """Base class of every error raised by ``gateway.core``."""


class IllegalTransition(CoreError):
    """A state machine was asked for a move its transition table does not have.

    ``machine`` names the table, ``state`` and ``event`` the rejected pair (as their readable names).
    """

    def __init__(self, machine: str, state: str, event: str) -> None:
        self.machine = machine
        self.state = state
        self.event = event
        super().__init__(f"{machine}: no transition from state {state} on event {event}")


class InvalidMessage(CoreError, ValueError):
    """A chat message that is not an OpenAI message mapping (missing or unknown ``role``).

    ``index`` is the message's position in the list it came from.
    """

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"message {index}: {problem}")


class ContextWindowExceeded(CoreError):
    """Even the smallest context that can be built (the client's own messages, no pages) needs more tokens
    than the model's context window holds. ``needed`` and ``window`` are token counts.

    The HTTP edge turns this into a 400 ``context_length_exceeded``.
    """

    def __init__(self, needed: int, window: int) -> None:
        self.needed = needed
        self.window = window
        super().__init__(
            f"the request needs at least {needed} tokens but the model's context window is {window} tokens"
        )
