"""The scaffolding rule, driven on message lists shaped like the ones aider sends (recorded through the gateway)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import scaffolding
from gateway.core.blocks import split_blocks
from gateway.core.pages import page_id
from gateway.core.scaffolding import PREAMBLE_BLOCKS, Layout, compile_pins, head_of, is_plain_exchange, scaffolding_blocks, settled
from gateway.core.scaffolding import decide as decide_layout

Message = dict[str, Any]

PINS = compile_pins([r"^Here are summaries of some files", r"^I have \*added these files to the chat\*"])
PREAMBLE = compile_pins([r"^I switched to a new code base"])


def pair(question: str, answer: str) -> list[Message]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


EXAMPLES = pair("Change get_factorial() to use math.factorial", "To make this change we need ...") + pair(
    "Refactor hello() into its own file.", "To make this change we need to modify `main.py` ..."
)
SWITCHED = pair("I switched to a new code base. Please don't consider the above files.", "Ok.")
REPO = pair("Here are summaries of some files present in my git repository.\nmain.py:\n⋮\n", "Ok, I won't try ...")


def files(content: str) -> list[Message]:
    return pair(f"I have *added these files to the chat* so you can go ahead and edit them.\n\ngreet.py\n```\n{content}\n```", "Ok, any changes I propose will be to those files.")


def decide(messages: list[Message], pins: tuple[re.Pattern[str], ...] = PINS, preamble: tuple[re.Pattern[str], ...] = PREAMBLE) -> list[str]:
    """The first user line of every scaffolding block, in order."""
    blocks = split_blocks(messages).blocks
    return [blocks[i].anchor_text.splitlines()[0][:20] for i in sorted(scaffolding_blocks(blocks, pins, preamble))]


def test_aider_before_any_edit_examples_repo_map_and_files_are_scaffolding_the_exchanges_are_not() -> None:
    conversation = pair("Turn one: explain greet", "It greets.") + pair("Turn two: and bye?", "It says bye.")
    messages = [{"role": "system", "content": "Act as an expert"}, *EXAMPLES, *SWITCHED, *REPO, *files("v1"), *conversation]
    assert decide(messages) == ["Change get_factorial", "Refactor hello() int", "I switched to a new ", "Here are summaries o", "I have *added these "]


def test_aider_after_an_edit_the_file_block_between_conversation_parts_is_scaffolding_in_its_place() -> None:
    done = pair("Turn one: add bye", "greet.py\n<<<<<<< SEARCH ...") + pair("I committed the changes with git hash abc", "Ok.")
    messages = [*EXAMPLES, *SWITCHED, *REPO, *done, *files("v2"), *pair("Turn two", "Done.")]
    blocks = split_blocks(messages).blocks
    assert sorted(scaffolding_blocks(blocks, PINS, PREAMBLE)) == [0, 1, 2, 3, 6]  # not the edit or its commit note


def test_no_markers_no_scaffolding() -> None:
    blocks = split_blocks([*EXAMPLES, *SWITCHED, *REPO, *files("v1")]).blocks
    assert scaffolding_blocks(blocks, ()) == frozenset()
    assert scaffolding_blocks(blocks, (), ()) == frozenset()


def test_preamble_without_examples_is_the_marker_alone_and_pins_need_no_preamble() -> None:
    assert decide([*SWITCHED, *pair("hi", "hello")]) == ["I switched to a new "]
    assert decide([*pair("hi", "hello"), *REPO], preamble=()) == ["Here are summaries o"]


def test_only_the_first_marker_closes_the_preamble() -> None:
    messages = [*EXAMPLES, *SWITCHED, *pair("hi", "hello"), *pair("I switched to a new code base again", "Ok.")]
    assert decide(messages, pins=()) == ["Change get_factorial", "Refactor hello() int", "I switched to a new "]


def test_a_marker_after_tool_work_opens_no_preamble() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    work = [{"role": "user", "content": "read it"}, call, {"role": "tool", "tool_call_id": "c1", "content": "text"}, {"role": "assistant", "content": "done"}]
    assert decide([*work, *SWITCHED, *pair("hi", "hello")], pins=()) == []
    assert decide([*work, *SWITCHED, *REPO]) == ["Here are summaries o"]


def test_pins_search_the_user_text_not_the_reply() -> None:
    assert decide(pair("plain question", "Here are summaries of some files"), preamble=()) == []
    assert decide([{"role": "assistant", "content": "greeting first"}, *pair("x", "y")]) == []  # a block without user text


def test_a_pinned_block_is_pinned_in_any_shape() -> None:
    merged = [{"role": "user", "content": "Here are summaries of some files"}, {"role": "user", "content": "and more"}, {"role": "assistant", "content": "Ok."}]
    assert decide(merged) == ["Here are summaries o"]


@pytest.mark.parametrize(
    ("messages", "plain"),
    [
        (pair("q", "a"), True),
        ([{"role": "user", "content": "q"}, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a"}], False),
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "a"}], False),
        ([{"role": "assistant", "content": "a"}], False),
        ([{"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "assistant", "content": "a"}], False),
    ],
)
def test_plain_exchange_shape(messages: list[Message], plain: bool) -> None:
    blocks = split_blocks(messages).blocks
    assert is_plain_exchange(blocks[0]) is plain


def test_bad_pattern_is_an_re_error() -> None:
    with pytest.raises(re.error):
        compile_pins(["(unclosed"])


# The structural rule: a thread's requests in order, each decided against the layout of the one before.

SYSTEM = {"role": "system", "content": "Act as an expert software developer."}


def turn(n: int, answer: str | None = None) -> list[Message]:
    return pair(f"Turn {n}: a question about topic {n}", answer or f"Answer {n}: the reply to topic {n}.")


def live(n: int) -> Message:
    return {"role": "user", "content": f"Turn {n}: a question about topic {n}"}


def thread(requests: list[list[Message]], pins: tuple[re.Pattern[str], ...] = (), preamble: tuple[re.Pattern[str], ...] = ()) -> list[list[str]]:
    """Each request's scaffolding, as the first user line (20 characters) of each block, in order, deciding every
    request against the layout the previous one left, through its serialized form as the store keeps it."""
    remembered: str | None = None
    decided = []
    for messages in requests:
        blocks = split_blocks(messages).blocks
        split = split_blocks(messages)
        decision = decide_layout(blocks, [page_id(b.text) for b in blocks], split.tail, Layout.loads(remembered), pins, preamble)
        if decision.layout is not None:
            remembered = decision.layout.dumps()
        decided.append([blocks[i].anchor_text.splitlines()[0][:20] for i in sorted(decision.scaffold)])
    return decided


def aider(done: list[Message], version: str, repo: list[Message] = REPO) -> list[Message]:
    """An aider request: examples, the code-base switch, the repo map, the history, the chat files, the live turn."""
    return [SYSTEM, *EXAMPLES, *SWITCHED, *repo, *done, *files(version)]


LEAD = ["Change get_factorial", "Refactor hello() int", "I switched to a new ", "Here are summaries o"]
FILES = "I have *added these "


def test_aider_without_pins_its_scaffolding_is_found_from_the_second_request_on() -> None:
    repo2 = pair("Here are summaries of some files present in my git repository.\nmain.py:\n⋮\nmathy.py:\n⋮\n", "Ok, I won't try ...")
    decided = thread([
        [*aider([], "v1"), live(1)],
        [*aider(turn(1), "v1"), live(2)],
        [*aider(turn(1) + turn(2, "greet.py\n<<<<<<< SEARCH ..."), "v2"), live(3)],  # the edit changed the file
        [*aider(turn(1) + turn(2) + turn(3), "v2", repo2), live(4)],  # and the repository map
        [*aider(turn(1) + turn(2) + turn(3) + turn(4), "v3", repo2), live(5)],
    ])  # fmt: skip
    assert decided[0] == []  # a first request has nothing to compare with: an imported history looks the same
    assert decided[1:] == [[*LEAD, FILES]] * 4  # the new file block and map replace the old ones, in their place


def test_a_block_said_again_word_for_word_after_an_edit_is_conversation_not_scaffolding() -> None:
    updated = pair("I updated the files.", "Ok.")
    first = [*turn(1, "greet.py\n<<<<<<< SEARCH ..."), *updated, *turn(2)]
    second = [*first, *turn(3, "greet.py\n<<<<<<< SEARCH again"), *updated]  # the same note after the next edit
    decided = thread([
        [*aider([], "v1"), live(1)],
        [*aider(first[:4], "v2"), live(2)],
        [*aider(first, "v2"), live(3)],
        [*aider(second, "v3"), live(4)],
        [*aider([*second, *turn(4)], "v3"), live(5)],
    ], PINS, PREAMBLE)  # fmt: skip
    assert decided == [[*LEAD, FILES]] * 5  # the notes stay in the conversation, each after its edit


def test_aider_with_pins_its_scaffolding_is_found_from_the_first_request() -> None:
    decided = thread([[*aider([], "v1"), live(1)], [*aider(turn(1), "v2"), live(2)]], PINS, PREAMBLE)
    assert decided == [[*LEAD, FILES]] * 2


def test_aider_when_the_first_answer_is_reflected_the_files_block_is_found_once_the_conversation_grows_before_it() -> None:
    reflect = {"role": "user", "content": "The SEARCH block did not match: fix it."}
    decided = thread([
        [*aider([], "v1"), live(1)],
        [*aider([], "v1"), *turn(1), reflect],  # aider's current turn comes after the files: the end grew
        [*aider(turn(1) + [reflect, {"role": "assistant", "content": "Fixed."}], "v1"), live(2)],
        [*aider(turn(1) + [reflect, {"role": "assistant", "content": "Fixed."}] + turn(2), "v2"), live(3)],
    ])  # fmt: skip
    assert decided == [[], [], [*LEAD, FILES], [*LEAD, FILES]]


REMINDER = "<reminder>\nKeep answers short. Use the tools.\n"


def reminder(todo: str) -> list[Message]:
    return pair(f"{REMINDER}Todo: {todo}", "Understood.")


def test_a_reminder_between_the_history_and_the_live_turn_is_scaffolding_and_its_update_replaces_it() -> None:
    decided = thread([
        [SYSTEM, *reminder("nothing yet"), live(1)],
        [SYSTEM, *turn(1), *reminder("nothing yet"), live(2)],
        [SYSTEM, *turn(1), *turn(2), *reminder("write the tests"), live(3)],  # updated in place
        [SYSTEM, *turn(1), *turn(2), *turn(3), *reminder("write the tests"), live(4)],
    ])  # fmt: skip
    assert decided == [[], ["<reminder>"], ["<reminder>"], ["<reminder>"]]


def test_a_block_that_was_scaffolding_stays_so_wherever_it_moves() -> None:
    decided = thread([
        [*reminder("a"), live(1)],
        [*turn(1), *reminder("a"), live(2)],
        [*reminder("a"), *turn(1), *turn(2), live(3)],  # the client moved it to the front
    ])  # fmt: skip
    assert decided == [[], ["<reminder>"], ["<reminder>"]]


def test_a_first_requests_history_before_a_reminder_is_taken_for_a_preamble_only_while_it_is_short() -> None:
    """The ambiguity the cap bounds: by structure, a history the thread's first request brought, followed by a
    reminder the client re-sends, looks like aider's examples before its files block."""
    short = [m for n in range(1, 3) for m in turn(n)]
    decided = thread([[*short, *reminder("a"), live(3)], [*short, *turn(3), *reminder("a"), live(4)]])
    assert decided == [[], ["Turn 1: a question a", "Turn 2: a question a", "<reminder>"]]
    long = [m for n in range(1, PREAMBLE_BLOCKS + 2) for m in turn(n)]
    decided = thread([[*long, *reminder("a"), live(99)], [*long, *turn(99), *reminder("a"), live(100)]])
    assert decided == [[], ["<reminder>"]]


def test_a_plain_growing_chat_has_no_scaffolding() -> None:
    done: list[Message] = []
    requests = []
    for n in range(1, 7):
        requests.append([SYSTEM, *done, live(n)])
        done += turn(n, "Ok.")  # the same short answer every time
    assert thread(requests) == [[]] * 6


def test_an_imported_history_that_grows_at_its_end_has_no_scaffolding() -> None:
    history = [m for n in range(1, 9) for m in turn(n)]
    requests = [[*history, live(9)], [*history, *turn(9), live(10)], [*history, *turn(9), *turn(10), live(11)]]
    assert thread(requests, PINS) == [[]] * 3


def test_a_chat_whose_client_edits_retries_or_truncates_has_no_scaffolding() -> None:
    decided = thread([
        [*turn(1), *turn(2), live(3)],
        [*turn(1), *turn(2), *turn(3), live(4)],
        [*turn(1), *turn(2), *turn(3, "Answer 3, regenerated."), live(4)],  # the last answer regenerated
        [*turn(1), *turn(2), *turn(3, "Answer 3, regenerated."), live(4)],  # a retry: the same request again
        [*turn(1), *pair("A rewritten second question", "Answer 2"), *turn(3, "Answer 3, regenerated."), live(4)],  # edited in the middle
        [*turn(1), *pair("Turn 2: a question about topic 2, edited", "Answer 2'"), live(3)],  # an edit cuts the rest
        [*turn(1), *pair("Turn 2: a question about topic 2, edited", "Answer 2'"), *turn(3), live(4)],
        [*pair("Summary of turns 1 to 3", "Ok."), *turn(4), live(5)],  # the client summarized its history
        [*pair("Summary of turns 1 to 3", "Ok."), *turn(4), *turn(5), live(6)],
    ])  # fmt: skip
    assert decided == [[]] * 9


def test_a_pin_in_a_plain_chat_does_not_make_its_history_a_preamble() -> None:
    pasted = pair("I have *added these files to the chat* — a line the user pasted", "I see.")
    decided = thread([[*turn(1), *turn(2), live(3)], [*turn(1), *turn(2), *turn(3), *pasted, live(4)], [*turn(1), *turn(2), *turn(3), *pasted, *turn(4), live(5)]], PINS)
    assert decided == [[], [FILES], [FILES]]


def test_a_lead_with_tool_work_is_no_preamble() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    work = [{"role": "user", "content": "read it"}, call, {"role": "tool", "tool_call_id": "c1", "content": "text"}, {"role": "assistant", "content": "done"}]
    decided = thread([[*work, *reminder("a"), live(1)], [*work, *turn(1), *reminder("a"), live(2)]])
    assert decided == [[], ["<reminder>"]]


def test_markers_added_to_the_config_apply_to_the_blocks_already_seen() -> None:
    requests = [[*aider([], "v1"), live(1)]] * 2  # a retry: no growth, so the layout alone shows nothing new
    remembered = None
    decided = []
    for messages, pins in zip(requests, [(), PINS]):  # the gateway restarted with pins between the two
        split = split_blocks(messages)
        decision = decide_layout(split.blocks, [page_id(b.text) for b in split.blocks], split.tail, remembered, pins, PREAMBLE)
        remembered = decision.layout
        decided.append(sorted(decision.scaffold))
    assert decided == [[0, 1, 2], [0, 1, 2, 3, 4]]  # the preamble, then the repository map and the files block too


def test_a_request_without_sealed_blocks_keeps_the_layout() -> None:
    first = split_blocks([*turn(1), *reminder("a"), live(2)])
    layout = decide_layout(first.blocks, [page_id(b.text) for b in first.blocks], first.tail, None).layout
    assert layout is not None and decide_layout([], [], [live(3)], layout).layout is None  # e.g. a side request for a title
    empty = decide_layout([], [], [live(1)], None).layout
    assert empty is not None and (empty.ids, empty.live) == ((), head_of(live(1)["content"]))


@pytest.mark.parametrize("raw", [None, "", "not json", "[]", '{"v": 1}', '{"v": 2, "ids": [], "heads": [], "kinds": ""}',
                                 '{"v": 1, "ids": ["a"], "heads": [], "kinds": "s"}', '{"v": 1, "ids": ["a"], "heads": ["h"], "kinds": "x", "live": ""}', '{"v": 1, "ids": [], "heads": [], "kinds": ""}'])  # fmt: skip
def test_a_layout_that_is_not_one_this_version_wrote_is_none(raw: str | None) -> None:
    assert Layout.loads(raw) is None


def test_a_layout_round_trips() -> None:
    layout = Layout(("a1", "b2"), ("h", ""), "so", "l", "p")
    assert Layout.loads(layout.dumps()) == layout and Layout.loads(layout.dumps().encode()) == layout


def test_the_same_blocks_asked_again_keep_their_kinds_as_the_rule_gives_them() -> None:
    """A new question on the same history (or a retry) takes the previous layout's kinds without walking the rule;
    the result is the rule's: here aider's scaffolding found from the second request on, then asked about again."""
    done = [*turn(1), *turn(2)]
    first = aider([], "v1") + [live(1)]
    second = aider(done, "v1") + [live(3)]
    third = aider(done, "v1") + [{"role": "user", "content": "Something else entirely"}]
    assert thread([first, second, third])[2] == thread([first, second, second])[2] == [*LEAD, FILES]
    blocks = split_blocks(second).blocks
    ids = [page_id(b.text) for b in blocks]
    previous = decide_layout(blocks, ids, split_blocks(second).tail, None).layout
    assert previous is not None
    again = decide_layout(blocks, ids, split_blocks(third).tail, previous)
    assert again.layout is not None and again.layout.kinds == previous.kinds and again.layout.ids is previous.ids
    assert again.layout.live != previous.live


def test_a_layout_is_written_as_json_whether_or_not_its_lists_were_written_before() -> None:
    layout = Layout(("a1", "b2"), ("Hi \u00e9", 'say "x"'), "go", "live", "h")
    expected = json.dumps({"v": 1, "ids": layout.ids, "heads": layout.heads, "kinds": "go", "live": "live", "hints": "h"},
                          separators=(",", ":"))
    assert layout.dumps() == layout.dumps(layout.lists()) == expected
    assert Layout.loads(layout.dumps()) == layout


# A chat's next request (the previous blocks, all of them, and new ones after) is decided without the rule's walk:
# the decision must be the walk's, whatever the blocks (pinned, a preamble marker, blocks said again).

_BLOCKS = [
    *(pair(f"Turn {n}: a question", "Ok.") for n in range(6)),  # short answers said again word for word
    REPO, SWITCHED, files("a = 1"), files("a = 2"), EXAMPLES[:2], EXAMPLES[2:],
]


@settings(max_examples=150, deadline=None)
@given(grows=st.lists(st.lists(st.integers(0, len(_BLOCKS) + 30), min_size=1, max_size=3), min_size=1, max_size=6),
       first=st.lists(st.integers(0, len(_BLOCKS) + 30), max_size=5), marked=st.booleans())
def test_a_chat_that_grows_at_its_end_is_decided_as_the_walk_decides_it(
    grows: list[list[int]], first: list[int], marked: bool
) -> None:
    def block(n: int) -> list[Message]:
        return _BLOCKS[n] if n < len(_BLOCKS) else turn(n)

    pins, preamble = (PINS, PREAMBLE) if marked else ((), ())
    done = [m for n in first for m in block(n)]
    remembered: tuple[str | None, str | None] = (None, None)
    for step, more in enumerate(grows):
        messages = [SYSTEM, *done, live(100 + step)]
        split = split_blocks(messages)
        ids = [page_id(b.text) for b in split.blocks]
        fast = decide_layout(split.blocks, ids, split.tail, Layout.loads(remembered[0]), pins, preamble)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(scaffolding, "_grown", lambda *_: None)
            walked = decide_layout(split.blocks, ids, split.tail, Layout.loads(remembered[1]), pins, preamble)
        assert fast == walked
        if fast.layout is not None:
            previous = Layout.loads(remembered[0])
            lists = fast.layout.lists((previous, previous.lists()) if previous is not None else None)
            assert lists == fast.layout.lists()
            remembered = (fast.layout.dumps(lists), walked.layout.dumps() if walked.layout is not None else remembered[1])
        done += [m for n in more for m in block(n)] + pair(f"Turn {100 + step}: a question about topic {100 + step}", "Ok.")


def walk_only(layout: Layout | None) -> Layout | None:
    """``layout`` with its ids in a list: no request's ids equal them or begin with them, so the decision against it
    is the rule's walk (`_structural`), with neither the same blocks' nor the grown chat's shortcut."""
    return replace(layout, ids=list(layout.ids)) if layout is not None else None  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(grows=st.lists(st.lists(st.integers(0, len(_BLOCKS) + 8), max_size=5), min_size=1, max_size=3),
       asked=st.integers(1, 3), fresh=st.booleans(), marked=st.booleans())
def test_a_history_asked_again_is_decided_as_the_walk_decides_it_blocks_said_again_too(
    grows: list[list[int]], asked: int, fresh: bool, marked: bool
) -> None:
    """A new question on the same blocks takes the previous kinds without the walk once they are settled, also where
    the history says a block again word for word (LongMemEval's filler sessions): the decision is the walk's."""
    def block(n: int) -> list[Message]:
        return _BLOCKS[n] if n < len(_BLOCKS) else turn(n % 3)  # turn(n % 3): the same exchange again

    pins, preamble = (PINS, PREAMBLE) if marked else ((), ())
    kept: Layout | None = None  # as a process keeps it (what it found settled carried), and as the store keeps it
    stored: str | None = None
    histories = [grows[0]]  # each the last grown at its end, or (``fresh``) another history
    for more in grows[1:]:
        histories.append(more if fresh else [*histories[-1], *more])
    for step, history in enumerate(h for h in histories for _ in range(asked + 1)):
        split = split_blocks([SYSTEM, *(m for n in history for m in block(n)), live(200 + step)])
        ids = [page_id(b.text) for b in split.blocks]
        fast = decide_layout(split.blocks, ids, split.tail, kept, pins, preamble)
        loaded = decide_layout(split.blocks, ids, split.tail, Layout.loads(stored), pins, preamble)
        walked = decide_layout(split.blocks, ids, split.tail, walk_only(Layout.loads(stored)), pins, preamble)
        assert fast == loaded == walked
        if fast.layout is not None:
            kept, stored = fast.layout, fast.layout.dumps()


def test_a_history_that_says_a_block_again_is_settled_after_one_request_on_it() -> None:
    """Copies of one block with different kinds are not settled; once the walk has given them all their last copy's
    kind they are (and the next request on the same blocks takes it without the walk)."""
    assert settled(Layout(("a", "b", "a"), ("", "", ""), "fgg")) is False
    assert settled(Layout(("a", "b", "a"), ("", "", ""), "ggg")) is True
    assert settled(Layout(("a", "b"), ("", ""), "fg")) is True


def test_a_block_said_again_as_the_history_grows_takes_its_last_kind_when_asked_again() -> None:
    """The history grows by a copy of an exchange it had (a new copy is growth), then is asked about again: the walk
    gives both copies the last one's kind, and so does the decision that skips it."""
    once = [SYSTEM, *turn(1), *turn(2)]
    twice = [*once, *turn(1)]
    first = split_blocks([*once, live(5)])
    previous = decide_layout(first.blocks, [page_id(b.text) for b in first.blocks], first.tail, None).layout
    for messages in ([*twice, live(6)], [*twice, live(7)], [*twice, live(8)]):
        split = split_blocks(messages)
        ids = [page_id(b.text) for b in split.blocks]
        walked = decide_layout(split.blocks, ids, split.tail, walk_only(previous))
        fast = decide_layout(split.blocks, ids, split.tail, previous)
        assert fast == walked and fast.layout is not None
        previous = fast.layout
    assert previous is not None and settled(previous) and previous.kinds[0] == previous.kinds[2]
