"""Line labels: what a client writes at the start of every line (a speaker's name, a timestamp, a channel, a tag),
found and set aside for matching.

A chat exported or bridged from a messenger, a group chat or a roleplay front-end writes each line ``Name: text``,
``[29/12/2023, 22:42] Name: text`` or ``<name> text``. Such a label carries no signal: it stands in every message of
its speaker, so a word matched on it, or an embedding pulled towards it, ranks pages by who spoke rather than by
what was said (DESIGN §2 step 5: the match must come out the same with or without it). The page keeps its text
verbatim; only what it is matched on (its term counts, its embeddings, the user's own words) leaves labels out.

A *head* is one of the parts a line may open with (after a transcript's role prefix, ``user:``): a bracketed
``[…]`` or ``<…>``, a bare timestamp (``29/12/2023, 22:42 -``), or a short name followed by a colon (one to three
words, no sentence punctuation). Its *shape* is the head case-folded with every digit as ``0``, so a timestamp's
shape is the same on every line. A shape is a *label* where it opens lines of at least :data:`LABEL_MESSAGES`
different messages close together (a message, the ones around it): a speaker's name heads each of their messages,
while ``Tokyo: 3 days`` or ``Note:`` in one message is its own content and stays.

What is shown writes a speaker's label once per run (:func:`written_once`): the second and later lines of a burst
repeat who is speaking, which the reader already knows (on the real chats, 39 of a 2k context's ~1,450 history tokens).
Where each side's messages open with that side's own name (:func:`named_sides`), the transcript's role prefix before
the name goes too (``user: Vanessa: …`` reads ``Vanessa: …``): the name says who speaks, and a ``user:`` /
``assistant:`` before it casts the two people of a chat as the model's user and itself — asked about such a chat, a
small model answered as one of its participants ("Nebraas: Yes") in 6 of 15 questions with the prefix, 1 without
(`bench.answers`, the REALTALK questions). A page shown whole (Detail) keeps its content as stored.

A chat between two people replayed as ``user`` / ``assistant`` messages (a client that knows only those two roles)
names neither side on its lines, yet each side calls the other by name: ``Hey Gina!``, ``Thanks, Jon.``
(:func:`called`). In each of LoCoMo's ten conversations each side calls the other so in 17 to 174 of its exchanges
(pages) and calls itself so at most once: :func:`side_names` names all twenty sides by their full names; in
LongMemEval's 99 user–assistant histories it names none (the assistant has no name to be called by). Where both
sides are named so, what is shown of a page writes each message's speaker by name (``Gina: …`` where it stored
``assistant: …``): a question about "Gina" is then answered from lines that say who Gina is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "LABEL_MESSAGES", "NAME_PAGES", "NAME_RATIO", "NAME_SHARE", "called", "label_shapes", "line_heads", "named_sides", "side_names",
    "speakers", "without_labels", "without_role", "written_once",
]  # fmt: skip

LABEL_MESSAGES = 2  # a head is a label when it opens lines of this many messages at least
NAME_WORDS = 2  # a speaker's name before a colon, where names stand for the sides: at most this many words
NAME_PAGES = 3  # a word names a participant when one side says it in this many pages at least,
NAME_SHARE = 0.02  # and in this share of the thread's pages,
NAME_RATIO = 10  # and this many times as often as the other side (who is not called by their own name)

# a transcript's role prefix (gateway.core.messages.transcript), kept in place
_ROLE = re.compile(r"(?:(?:user|assistant|system|developer)(?: \([^)\n]*\))?: |tool \S+ result: )")
_HEAD = re.compile(
    r"\s*(?:"
    r"\[[^\]\n]{1,40}\]"  # [29/12/2023, 22:42:04], [#general]
    r"|<[^<>\n]{1,32}>"  # <emi>
    r"|\d{1,4}[/.:-]\d{1,2}(?:[/.:, -]+\d{1,4}){0,5}(?:\s*[-–])?(?=\s)"  # 29/12/2023, 22:42 -
    r"|[^\W\d_][\w'’.-]{0,20}(?: [\w'’.-]{1,20}){0,2}:(?=\s)"  # Emi:, Fahim Khan:, Dr. Who:
    r")\s*",
    re.UNICODE,
)
_DIGIT = re.compile(r"\d")
_SIDES = ("user: ", "assistant: ")  # the roles a two-person chat is replayed as
_NAME_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# a name the speaker calls the one they talk to: after a greeting or a thanks (``Hey Gina!``, ``Thanks Jon``), or
# closing a clause after a comma (``That's great, Gina!``). Not a capitalized word opening a sentence before a comma
# ("Yes, …" opens 10 to 38 of the user's messages in 73 of LongMemEval's 99 histories, "Wow, …" LoCoMo's).
_CALLED = re.compile(
    r"\b(?:[Hh](?:ey|i|ello)|[Tt]hanks|[Tt]hank you|[Dd]ear|[Cc]ongrats|[Ss]orry|[Bb]ye)[,!]?\s+([A-Z][a-z]{1,15})\b"
    r"|,\s*([A-Z][a-z]{1,15})\s*(?:[!?.]|$)",
    re.MULTILINE,
)


def _shape(head: str) -> str:
    return _DIGIT.sub("0", " ".join(head.split()).casefold())


def _role_end(line: str) -> int:
    match = _ROLE.match(line)
    return match.end() if match else 0


def line_heads(line: str) -> list[tuple[str, int]]:
    """The heads ``line`` opens with, after its role prefix if it has one: each as (shape, end offset)."""
    found: list[tuple[str, int]] = []
    at = _role_end(line)
    while (match := _HEAD.match(line, at)) is not None and match.end() > at and match.end() < len(line):
        found.append((_shape(match.group(0)), match.end()))
        at = match.end()
    return found


def label_shapes(messages: Iterable[str], least: int = LABEL_MESSAGES) -> frozenset[str]:
    """The shapes of the heads that open lines of at least ``least`` of ``messages`` (texts of messages that
    belong together: a page's and its neighbours')."""
    messages_with: Counter[str] = Counter()
    for text in messages:
        messages_with.update({shape for line in text.split("\n") for shape, _ in line_heads(line)})
    return frozenset(shape for shape, n in messages_with.items() if n >= least)


def speakers(messages: Sequence[tuple[str, str]], least: int = LABEL_MESSAGES) -> dict[str, str]:
    """Who the line labels of ``messages`` ((role, text) pairs that belong together: a thread's last exchanges) name:
    each word of a name label (``Emi:``, ``Fahim Khan:``, ``<emi>``; not a timestamp or a ``[#channel]``), case-folded,
    with the role whose lines it opens. A word that opens lines of both roles names neither."""
    shapes = label_shapes((text for _, text in messages), least)
    roles: dict[str, set[str]] = {}
    for role, text in messages:
        for line in text.split("\n"):
            for shape, _ in line_heads(line):
                if shape in shapes and (shape.endswith(":") or shape.startswith("<")) and not _DIGIT.search(shape):
                    for word in _NAME_WORD.findall(shape):
                        roles.setdefault(word, set()).add(role)
    return {word: next(iter(found)) for word, found in roles.items() if len(found) == 1}


def called(text: str) -> frozenset[str]:
    """The names ``text`` calls the one it is said to by (``Hey Gina!`` → ``Gina``): see :data:`_CALLED`."""
    return frozenset(first or second for first, second in _CALLED.findall(text))


def side_names(called_in: Mapping[tuple[str, str], int], pages: int) -> dict[str, str]:
    """The names of a two-person chat's sides, role to name (``{"user": "Jon", "assistant": "Gina"}``), where both
    are known; else empty. ``called_in`` holds, per (role, name), in how many of the thread's ``pages`` that role's
    messages call the other side by that name (:func:`called`). A side is named by the name the other calls it most
    often, where that is in :data:`NAME_PAGES` pages and :data:`NAME_SHARE` of them at least, and :data:`NAME_RATIO`
    times as often as the side itself says it so (a participant is not called by their own name); where a longer
    name that passes too begins with it (``Mel`` most often, ``Melanie`` too), the longer. An assistant nobody names,
    or a name both say, and the chat is left as its roles write it."""
    least = max(NAME_PAGES, NAME_SHARE * pages)
    names: dict[str, str] = {}
    for caller, side in (("user", "assistant"), ("assistant", "user")):
        passing = sorted(((n, name) for (role, name), n in called_in.items()
                          if role == caller and n >= least and called_in.get((side, name), 0) * NAME_RATIO <= n), reverse=True)
        if passing:
            name = passing[0][1]
            # a nickname is the start of the name (Mel, Melanie; Deb, Deborah): the name, which a question uses
            names[side] = max((other for _, other in passing if other.startswith(name)), key=len)
    return names if len(names) == 2 and names["user"] != names["assistant"] else {}


def without_labels(text: str, shapes: frozenset[str], *, roles: bool = True) -> str:
    """``text`` with the heads of ``shapes`` left out where they open a line: what a page or a query is matched
    on. A transcript's role prefix stays, unless ``roles`` is false (what is embedded: the gateway's own ``user:``
    on every page is a label like any other)."""
    if not shapes and roles:
        return text
    lines = text.split("\n")
    for n, line in enumerate(lines):
        start = cut = _role_end(line)
        for shape, end in line_heads(line):
            if shape not in shapes:
                break
            cut = end
        if cut > start or (start and not roles):
            lines[n] = (line[:start] if roles else "") + line[cut:]
    return "\n".join(lines)


def named_sides(firsts: Sequence[str]) -> bool:
    """Whether the first rows of a transcript's messages (``firsts``) name their speakers: each opens, after its role
    prefix, with a name label (``Vanessa:``, ``Mrs. Murdo:``: at most :data:`NAME_WORDS` words, no digit, no bracket),
    one name per role, the roles' names different. Then the name says who speaks and the role prefix only repeats it
    (a tool's or a system row keeps every prefix). Of LongMemEval's 23,864 exchanges 13 pass: a role-play's
    ``alicia:`` / ``Mrs. Murdo:``, and one ``Target:`` / ``Subject:``; a sentence that opens with a title (``It was
    Spider-Man: No Way Home``) does not."""
    names: dict[str, str] = {}
    for row in firsts:
        start = _role_end(row)
        role = row[:start]
        heads = line_heads(row)
        if role not in _SIDES or not heads or not row[start:heads[0][1]].rstrip().endswith(":"):
            return False
        name = heads[0][0]
        if _DIGIT.search(name) or len(name.split()) > NAME_WORDS or names.setdefault(role, name) != name:
            return False
    return len(set(names.values())) == len(names) > 0


def without_role(row: str) -> str:
    """``row`` without its transcript role prefix (``user: ``), if it has one."""
    return row[_role_end(row):]


def written_once(rows: Iterable[str]) -> list[str]:
    """Transcript ``rows`` as shown: a row that repeats the heads of the row before it, said by the same speaker
    (no role prefix, or the same one), leaves them out — ``user: Emi: a`` / ``Emi: b`` / ``user: Emi: c`` reads
    ``user: Emi: a`` / ``b`` / ``c``. Only a head written again word for word goes, and never one with a digit (a
    timestamp, ``1/2 teaspoon``); rows without heads (a plain user / assistant chat), indented rows and a code block's
    rows (``<td>`` on every line of HTML is markup, not a speaker) are left as they are. One row out per row in."""
    shown: list[str] = []
    role = labels = ""
    code = False
    for row in rows:
        start = _role_end(row)
        if row[start:].lstrip().startswith("```"):
            code = not code
        heads = line_heads(row) if not code and not row[start : start + 1].isspace() else []
        end = heads[-1][1] if heads else start
        row_role, row_labels = row[:start], row[start:end]
        if row_labels and row_labels == labels and (not row_role or row_role == role) and not _DIGIT.search(row_labels):
            shown.append(row[end:])
            continue
        role = row_role or role
        labels = row_labels
        shown.append(row)
    return shown
