"""The zoom loop, driven step by step without any IO."""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Mapping
from datetime import datetime, timezone
from typing import Any

import pytest

from gateway.core.pages import Page, PageType
from gateway.core.render import NodeSpec, render_node
from gateway.core.rounds import ModelCall, NeedPages, Room, RoundsOutcome, ZoomRoundFailed, zoom_rounds
from gateway.core.zoom_calls import ZoomNames, split_calls, text_call
from gateway.core.trace import Step
from gateway.core.views import PageTree, View

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)
NAMES = ZoomNames("pcp_consult", "pcp_shelve")


def page(pid: str, kind: PageType = PageType.ORIGINAL, sources: tuple[str, ...] = ()) -> Page:
    return Page(pid, kind, NOW, f"content of {pid}", f"summary of {pid}", ("kw",), 5, sources)


A, B, C, D, E = "aaaaaaaa01", "bbbbbbbb02", "cccccccc03", "dddddddd04", "eeeeeeee05"
PAGES = {A: page(A), B: page(B), C: page(C, PageType.CONSOLIDATED, (A, B)), D: page(D), E: page(E, PageType.CONSOLIDATED, (C, D))}
FLAT = PageTree((A, B), {}, frozenset())
NESTED = PageTree((C,), {C: (A, B)}, frozenset({C}))
DEEP = PageTree((E,), {E: (C, D), C: (A, B)}, frozenset({C, E}))
START = [{"role": "system", "content": "ctx"}, {"role": "user", "content": "q"}]


def call(name: str, args: Any, cid: str = "c1") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def assistant(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def drive(
    gen: Generator[ModelCall | NeedPages, Any, RoundsOutcome], replies: list[dict[str, Any]], pages: Mapping[str, Page] = PAGES
) -> tuple[list[ModelCall], list[NeedPages], RoundsOutcome]:
    calls: list[ModelCall] = []
    loads: list[NeedPages] = []
    effect = next(gen)
    answers = iter(replies)
    while True:
        if isinstance(effect, NeedPages):
            loads.append(effect)
            reply: Mapping[str, Any] = {i: pages[i] for i in effect.ids}
        else:
            calls.append(effect)
            reply = next(answers)
        try:
            effect = gen.send(reply)
        except StopIteration as stop:
            return calls, loads, stop.value


ROOMY = Room(10**6, len)


def rounds(
    tree: PageTree = FLAT, state: Mapping[str, View] | None = None, max_rounds: int = 3, room: Room = ROOMY
) -> Generator[ModelCall | NeedPages, Any, RoundsOutcome]:
    return zoom_rounds(START, tree=tree, state=state or {}, steps=(), names=NAMES, now=NOW, max_rounds=max_rounds, room=room, trace_limit=5)


def test_a_plain_answer_takes_one_round() -> None:
    calls, loads, outcome = drive(rounds(), [assistant(content="hello")])
    assert [c.offer_zoom for c in calls] == [True] and loads == []
    assert outcome.reply == {"role": "assistant", "content": "hello"} and outcome.rounds == 1 and outcome.touched == ()
    assert outcome.consults == 0


def test_consult_opens_the_page_and_the_next_round_only_appends() -> None:
    calls, loads, outcome = drive(rounds(), [assistant(call("pcp_consult", {"reason": "need it", "ids": [A]})), assistant(content="done")])
    assert len(calls) == 2 and loads == [NeedPages((A,))]
    first, second = calls
    assert second.messages[: len(first.messages)] == first.messages
    zoom_call, result = second.messages[len(first.messages) :]
    assert zoom_call["role"] == "assistant" and zoom_call["tool_calls"][0]["function"]["name"] == "pcp_consult"
    assert result["role"] == "tool" and result["tool_call_id"] == "c1"
    assert "Summary → Detail" in result["content"]
    assert f'<Node id="{A}" type="Original" view="Detail"' in result["content"] and "content of " + A in result["content"]
    assert outcome.state == {A: View.DETAIL} and outcome.touched == (A,) and outcome.rounds == 2
    assert outcome.steps == (Step("Consult", A, "need it", NOW),) and outcome.consults == 1


def test_shelve_folds_and_renders_the_summary() -> None:
    calls, _, outcome = drive(rounds(state={A: View.DETAIL}), [assistant(call("pcp_shelve", {"reason": "done", "ids": A})), assistant(content="ok")])
    result = calls[1].messages[-1]["content"]
    assert "Detail → Summary" in result and "<Summary>summary of " + A in result
    assert outcome.state == {} and outcome.touched == (A,) and outcome.consults == 0  # a Shelve is no Consult


def test_unpacking_a_container_shows_its_children() -> None:
    calls, loads, outcome = drive(
        rounds(NESTED, {C: View.DETAIL}), [assistant(call("pcp_consult", {"reason": "open", "ids": [C]})), assistant(content="ok")]
    )
    assert loads == [NeedPages((C, A, B))]
    result = calls[1].messages[-1]["content"]
    assert 'view="Unpacked"' in result and f'<Node id="{A}" type="Original" view="Summary"' in result
    assert outcome.state == {C: View.UNPACKED}


def test_unknown_ids_and_bad_arguments_are_answered_in_plain_words() -> None:
    calls, loads, outcome = drive(
        rounds(),
        [assistant(call("pcp_consult", {"reason": "x", "ids": ["ffffffff99"]}, "c1"), call("pcp_shelve", "{broken", "c2")), assistant(content="ok")],
    )
    unknown, broken = calls[1].messages[-2:]
    assert unknown["tool_call_id"] == "c1" and "no page with this id" in unknown["content"] and "<Node" not in unknown["content"]
    assert broken["tool_call_id"] == "c2" and "not valid JSON" in broken["content"]
    assert loads == [] and outcome.state == {}


def test_parallel_zoom_calls_get_one_result_each_and_a_page_is_rendered_once() -> None:
    calls, _, outcome = drive(
        rounds(),
        [assistant(call("pcp_consult", {"reason": "a", "ids": [A, B]}, "c1"), call("pcp_consult", {"reason": "again", "ids": [A]}, "c2")), assistant(content="ok")],
    )
    first, second = calls[1].messages[-2:]
    assert first["content"].count("<Node") == 2 and "<Node" not in second["content"]
    assert "already in Detail" in second["content"]
    assert outcome.state == {A: View.DETAIL, B: View.DETAIL} and len(outcome.steps) == 3
    assert outcome.consults == 2  # calls, not ids: three steps from two calls


def node_tokens(page_id: str) -> int:
    """What ``Room(…, len)`` charges for a page of ``PAGES`` opened on its own."""
    return len(render_node(NodeSpec(PAGES[page_id], View.DETAIL)))


def test_a_consult_opens_its_pages_in_order_while_they_fit_the_room_the_first_round_left() -> None:
    room = Room(node_tokens(A) + node_tokens(B) - 1, len)  # one short of both
    calls, loads, outcome = drive(rounds(room=room), [assistant(call("pcp_consult", {"reason": "r", "ids": [A, B]})), assistant(content="ok")])
    result = calls[1].messages[-1]["content"]
    assert loads == [NeedPages((A, B))]  # loaded before deciding: each page is measured before it opens
    assert f'<Node id="{A}"' in result and f'<Node id="{B}"' not in result
    assert f"{B}: not opened." in result
    assert result.split("\n<Node")[0].endswith("call no tool unless you need another page.")
    assert outcome.state == {A: View.DETAIL} and outcome.touched == (A,)
    assert [s.target for s in outcome.steps] == [A]  # the trace holds what was opened
    roomy = Room(node_tokens(A) + node_tokens(B), len)
    _, _, outcome = drive(rounds(room=roomy), [assistant(call("pcp_consult", {"reason": "r", "ids": [A, B]})), assistant(content="ok")])
    assert outcome.state == {A: View.DETAIL, B: View.DETAIL}


def test_the_first_page_a_round_opens_always_opens_so_a_round_is_over_by_at_most_one_page() -> None:
    none = Room(0, len)
    both = assistant(call("pcp_consult", {"reason": "a", "ids": [A]}, "c1"), call("pcp_consult", {"reason": "b", "ids": [B]}, "c2"))
    calls, _, outcome = drive(rounds(room=none), [both, assistant(call("pcp_consult", {"reason": "b", "ids": [B]})), assistant(content="ok")])
    first, second = calls[1].messages[-2:]
    assert f'<Node id="{A}"' in first["content"] and "not opened" in second["content"] and "<Node" not in second["content"]
    assert calls[2].messages[-1]["content"].count(f'<Node id="{B}"') == 1  # the next round's first page opens
    assert outcome.state == {A: View.DETAIL, B: View.DETAIL} and outcome.rounds == 3


def test_a_container_too_large_for_the_room_opens_unpacked_so_its_children_can_be_consulted_one_by_one() -> None:
    big = Page(C, PageType.CONSOLIDATED, NOW, "a long topic. " * 500, "summary of the topic", ("kw",), 1500, (A, B))
    pages = {**PAGES, C: big}
    room = Room(200, len)
    calls, _, outcome = drive(rounds(NESTED, room=room), [assistant(call("pcp_consult", {"reason": "r", "ids": [C]})), assistant(content="ok")], pages)
    result = calls[1].messages[-1]["content"]
    assert 'view="Unpacked"' in result and "a long topic." not in result and f'<Node id="{A}" type="Original" view="Summary"' in result
    assert len(result) < len(big.content) // 10
    assert [s.target for s in outcome.steps] == [C]
    # a container that fits opens in Detail, as before
    _, _, outcome = drive(rounds(NESTED), [assistant(call("pcp_consult", {"reason": "r", "ids": [C]})), assistant(content="ok")], pages)
    assert outcome.state == {C: View.DETAIL}


def _long_topic(children: int) -> tuple[PageTree, dict[str, Page], list[str]]:
    """A container of ``children`` exchanges with long summaries; the 17th is about the kayak."""
    kids = [f"{i:08d}f{i % 10}" for i in range(children)]
    pages = {
        kid: Page(kid, PageType.ORIGINAL, NOW, f"exchange {i}: " + ("about the kayak paddle. " if i == 17 else "about the garden. ") * 40,
                  f"summary {i}: " + ("the kayak paddle is carbon. " if i == 17 else "the garden needs water. ") * 12, ("kw",), 300)
        for i, kid in enumerate(kids)
    }
    pages[C] = Page(C, PageType.CONSOLIDATED, NOW, "the whole topic. " * 2000, "garden and kayak", ("kw",), 12000, tuple(kids))
    return PageTree((C,), {C: tuple(kids)}, frozenset({C})), pages, kids


def test_a_container_whose_unpacked_node_does_not_fit_shows_its_best_matching_children_and_lists_the_others() -> None:
    tree, pages, kids = _long_topic(40)
    room = Room(3700, len)  # characters: room for the others' lines and a child's Summary node or two
    gen = zoom_rounds(START, tree=tree, state={}, steps=(), names=NAMES, now=NOW, max_rounds=3, room=room, query="what is the kayak paddle made of?")
    calls, _, outcome = drive(gen, [assistant(call("pcp_consult", {"reason": "the paddle", "ids": [C]})), assistant(content="carbon")], pages)
    result = calls[1].messages[-1]["content"]
    node = result[result.index("<Node"):]
    assert 'view="Unpacked"' in node and f'<Node id="{kids[17]}" type="Original" view="Summary"' in node  # the one asked about
    assert 1 <= node.count('view="Summary"') < 5
    assert all(f"[{kid}] summary {i}: the garden" in result or f'<Node id="{kid}"' in node for i, kid in enumerate(kids))  # the others listed
    # what the node and its list cost (the tool result's other lines, its nudges, are not counted, as before)
    listing = re.search(rf"^{C}: \d of its 40 pages are shown", result, re.M)
    assert listing is not None and len(result[listing.start():]) <= 3700
    assert outcome.state[C] is View.UNPACKED
    # unbounded, the Unpacked node alone was four times the room
    assert len(render_node(NodeSpec(pages[C], View.UNPACKED, tuple(NodeSpec(pages[k], View.SUMMARY) for k in kids)))) > 4 * 3700
    # a listed child is one Consult away
    gen = zoom_rounds(START, tree=tree, state=outcome.state, steps=(), names=NAMES, now=NOW, max_rounds=3, room=Room(10**6, len))
    calls, _, outcome = drive(gen, [assistant(call("pcp_consult", {"reason": "r", "ids": [kids[3]]})), assistant(content="ok")], pages)
    assert f'<Node id="{kids[3]}" type="Original" view="Detail"' in calls[1].messages[-1]["content"]


def test_with_no_room_a_container_shows_one_child_and_lists_the_others_by_id_alone() -> None:
    tree, pages, kids = _long_topic(40)
    gen = zoom_rounds(START, tree=tree, state={}, steps=(), names=NAMES, now=NOW, max_rounds=3, room=Room(0, len), query="the kayak paddle")
    calls, _, _ = drive(gen, [assistant(call("pcp_consult", {"reason": "r", "ids": [C]})), assistant(content="ok")], pages)
    result = calls[1].messages[-1]["content"]
    assert result.count('view="Summary"') == 1 and f'<Node id="{kids[17]}"' in result
    assert f"[{kids[0]}]\n[{kids[1]}]" in result  # ids without their summaries' leads
    assert len(result) < 1200 + len(render_node(NodeSpec(pages[kids[17]], View.SUMMARY)))


def test_an_exchange_larger_than_the_budget_opens_in_part_and_whole_when_consulted_again() -> None:
    log = "\n".join(f"line {i}: worker {i % 7} polled the queue and found nothing to do" for i in range(300))
    content = f"user: why does the deploy hang? here is the log\n{log}\nline 300: ERROR disk quota exceeded on /var/cache\nassistant: The disk is full."
    big = Page(A, PageType.ORIGINAL, NOW, content, "the deploy hangs", ("kw",), 6000)
    pages = {**PAGES, A: big}
    room = Room(0, len, page=2000)  # characters: the first round left nothing, and one page may add 2,000
    gen = zoom_rounds(START, tree=FLAT, state={}, steps=(), names=NAMES, now=NOW, max_rounds=3, room=room, query="which error made the deploy hang?")
    ask = assistant(call("pcp_consult", {"reason": "the error in the log", "ids": [A]}))
    calls, _, outcome = drive(gen, [ask, ask, assistant(content="the disk quota")], pages)
    first = calls[1].messages[-1]["content"]
    node = first[first.index("<Node"):]
    assert f"{A}: shown in part" in first and "ERROR disk quota exceeded" in node and "…" in node
    assert len(node) <= 2000 < len(render_node(NodeSpec(big, View.DETAIL)))
    second = calls[2].messages[-1]["content"]
    assert f"{A}: the whole text" in second and second.count("worker 3 polled") == 43  # all of it
    assert outcome.state == {A: View.DETAIL} and [s.target for s in outcome.steps] == [A, A]
    # without a bound (no budget known), it opens whole at once, as the round's first page always did
    gen = zoom_rounds(START, tree=FLAT, state={}, steps=(), names=NAMES, now=NOW, max_rounds=3, room=Room(0, len), query="which error?")
    calls, _, _ = drive(gen, [ask, assistant(content="ok")], pages)
    assert calls[1].messages[-1]["content"].count("worker 3 polled") == 43


def test_no_page_opens_past_the_models_window_not_even_a_rounds_first() -> None:
    room = Room(0, len, window=node_tokens(A) - 1)
    calls, _, outcome = drive(rounds(room=room), [assistant(call("pcp_consult", {"reason": "r", "ids": [A]})), assistant(content="ok")])
    result = calls[1].messages[-1]["content"]
    assert result == f"{A}: not opened." and outcome.state == {} and outcome.steps == ()


def test_a_page_already_open_neither_costs_room_nor_counts_as_the_rounds_first() -> None:
    calls, _, outcome = drive(
        rounds(state={A: View.DETAIL}, room=Room(0, len)),
        [assistant(call("pcp_consult", {"reason": "r", "ids": [A, B]})), assistant(content="ok")],
    )
    assert "already in Detail" in calls[1].messages[-1]["content"] and outcome.state == {A: View.DETAIL, B: View.DETAIL}  # B is the first


def test_pages_a_consult_is_measured_on_are_loaded_even_when_a_later_call_of_the_round_folds_them() -> None:
    # E holds C, C holds A and B. The dry run ends with E folded back to Detail (which folds C), so it loads only
    # C and E; measuring the Consult needs C Unpacked, with its children: they are loaded before it is measured
    calls, loads, outcome = drive(
        rounds(DEEP, {E: View.UNPACKED, C: View.DETAIL}),
        [assistant(call("pcp_consult", {"reason": "open", "ids": [C]}, "c1"), call("pcp_shelve", {"reason": "fold", "ids": [E]}, "c2")), assistant(content="ok")],
    )
    assert loads == [NeedPages((C, E)), NeedPages((A, B))]
    assert "Detail → Unpacked" in calls[1].messages[-2]["content"] and outcome.state == {E: View.DETAIL}


def test_a_page_gone_from_the_store_is_left_out_without_asking_again() -> None:
    gen = rounds(NESTED, {C: View.DETAIL})
    assert isinstance(next(gen), ModelCall)
    load = gen.send(assistant(call("pcp_consult", {"reason": "open", "ids": [C]})))
    assert load == NeedPages((C, A, B))
    again = gen.send({C: PAGES[C], A: PAGES[A]})  # B was deleted since the context was built
    assert isinstance(again, ModelCall)
    result = again.messages[-1]["content"]
    assert f'<Node id="{A}"' in result and f'<Node id="{B}"' not in result


def test_mixed_calls_resolve_ours_and_return_theirs() -> None:
    theirs = call("get_weather", {"city": "Oslo"}, "c2")
    calls, loads, outcome = drive(rounds(), [assistant(call("pcp_consult", {"reason": "r", "ids": [A]}, "c1"), theirs, content="checking")])
    assert len(calls) == 1 and loads == []
    assert outcome.reply == {"role": "assistant", "content": "checking", "tool_calls": [theirs]}
    assert outcome.state == {A: View.DETAIL} and outcome.steps[0].target == A


def test_after_max_rounds_the_last_call_offers_no_zoom_and_stray_calls_are_dropped() -> None:
    consult = assistant(call("pcp_consult", {"reason": "r", "ids": [A]}))
    shelve = assistant(call("pcp_shelve", {"reason": "r", "ids": [B]}))
    calls, _, outcome = drive(rounds(state={B: View.DETAIL}, max_rounds=2), [consult, shelve, assistant(call("pcp_consult", {"reason": "r", "ids": [B]}), content="final")])
    assert [c.offer_zoom for c in calls] == [True, True, False] and [c.round for c in calls] == [1, 2, 3]
    assert outcome.reply == {"role": "assistant", "content": "final"} and outcome.rounds == 3
    assert outcome.state == {A: View.DETAIL} and outcome.touched == (A, B)


def test_a_round_the_upstream_failed_with_the_zoom_tools_is_asked_again_without_them() -> None:
    gen = rounds(max_rounds=3)
    first = next(gen)
    assert isinstance(first, ModelCall) and first.offer_zoom
    opened = gen.send(assistant(call("pcp_consult", {"reason": "r", "ids": [A]})))
    assert isinstance(opened, NeedPages)
    second = gen.send({A: PAGES[A]})
    assert isinstance(second, ModelCall) and second.offer_zoom and second.round == 2
    again = gen.throw(ZoomRoundFailed())
    assert isinstance(again, ModelCall) and not again.offer_zoom and again.round == 3
    assert again.messages == second.messages  # the same conversation, the page it read included
    with pytest.raises(StopIteration) as stop:
        gen.send(assistant(call("pcp_consult", {"reason": "r", "ids": [B]}), content="from what I read"))
    outcome: RoundsOutcome = stop.value.value
    assert outcome.reply == {"role": "assistant", "content": "from what I read"} and outcome.rounds == 3
    assert outcome.state == {A: View.DETAIL}  # the stray call of the tool-less round did nothing


def test_a_call_cut_short_is_answered_for_its_whole_ids_and_sent_back_as_far_as_it_was_read() -> None:
    cut = call("pcp_consult", '{"reason": "r", "ids": ["aaaaaaaa01", "bbbbbbbb', "c9")  # max_tokens ended it
    calls, loads, outcome = drive(rounds(), [assistant(cut), assistant(content="done")])
    sent = calls[1].messages
    read = '{"reason": "r", "ids": ["aaaaaaaa01"]}'
    assert sent[-2] == {"role": "assistant", "content": None, "tool_calls": [{**cut, "function": {"name": "pcp_consult", "arguments": read}}]}
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "c9" and A in sent[-1]["content"]
    assert loads == [NeedPages((A,))] and outcome.state == {A: View.DETAIL}


def test_arguments_that_are_no_json_at_all_are_sent_back_as_an_empty_object() -> None:
    broken = call("pcp_consult", "ids: aaaaaaaa01", "c8")
    calls, _, _ = drive(rounds(), [assistant(broken), assistant(content="done")])
    assert calls[1].messages[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert "not valid JSON" in calls[1].messages[-1]["content"]


def test_a_failure_on_a_round_without_zoom_tools_is_the_callers() -> None:
    gen = rounds(max_rounds=0)
    assert not next(gen).offer_zoom  # type: ignore[union-attr]
    with pytest.raises(ZoomRoundFailed):
        gen.throw(ZoomRoundFailed())


def test_no_rounds_offers_no_zoom_at_all() -> None:
    calls, _, outcome = drive(rounds(max_rounds=0), [assistant(content="x")])
    assert [c.offer_zoom for c in calls] == [False] and outcome.rounds == 1


def test_the_trace_is_bounded() -> None:
    replies = [assistant(call("pcp_consult", {"reason": f"r{i}", "ids": [A, B]})) for i in range(2)]
    replies += [assistant(call("pcp_consult", {"reason": "t", "ids": [A, B]}))]
    _, _, outcome = drive(rounds(max_rounds=3), [*replies, assistant(content="ok")])
    assert len(outcome.steps) == 5 and outcome.steps[-1].reason == "t"


@pytest.mark.parametrize(("calls", "ours", "theirs"), [([], 0, 0), ([call("pcp_shelve", "{}"), call("x", "{}"), {"id": "z"}], 1, 2)])
def test_split_calls(calls: list[dict[str, Any]], ours: int, theirs: int) -> None:
    got = split_calls({"tool_calls": calls}, NAMES)
    assert (len(got[0]), len(got[1])) == (ours, theirs)
    assert "pcp_consult" in NAMES and "x" not in NAMES


@pytest.mark.parametrize("text", [
    '{"name": "pcp_consult", "arguments": {"reason": "r", "ids": ["aaaaaaaa01"]}}',
    '```json\n{"name": "pcp_consult", "arguments": "{\\"reason\\": \\"r\\", \\"ids\\": [\\"aaaaaaaa01\\"]}"}\n```',
    ' {"name": "pcp_consult", "parameters": {"reason": "r", "ids": "aaaaaaaa01"}}\n',
])
def test_a_zoom_call_written_as_text_is_answered_like_a_tool_call(text: str) -> None:
    calls, loads, outcome = drive(rounds(), [assistant(content=text), assistant(content="the answer")])
    assert len(calls) == 2 and loads == [NeedPages((A,))]
    sent = calls[1].messages
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "pcp_consult" and sent[-2]["content"] is None
    assert sent[-1]["role"] == "tool" and "Summary → Detail" in sent[-1]["content"]
    assert outcome.reply == {"role": "assistant", "content": "the answer"} and outcome.state == {A: View.DETAIL}


def test_a_zoom_call_written_as_text_in_the_last_round_never_reaches_the_client() -> None:
    # asked once more (below) and written again: dropped, with no further round
    text = '{"name": "pcp_consult", "arguments": {"reason": "r", "ids": ["bbbbbbbb02"]}}'
    calls, _, outcome = drive(rounds(max_rounds=1), [assistant(call("pcp_consult", {"reason": "r", "ids": [A]})), assistant(content=text), assistant(content=text)])
    assert [c.offer_zoom for c in calls] == [True, False, False]
    assert outcome.reply == {"role": "assistant", "content": None} and outcome.state == {A: View.DETAIL} and outcome.rounds == 3


def test_a_last_round_of_nothing_but_zoom_calls_is_asked_again_with_what_was_read_in_the_context() -> None:
    text = '{"name": "pcp_consult", "arguments": {"ids": ["bbbbbbbb02"], "reason": "r"}}'
    replies = [assistant(call("pcp_consult", {"reason": "r", "ids": [A]})), assistant(call("pcp_shelve", {"reason": "r", "ids": [A]})), assistant(content=text), assistant(content="from what I read")]
    calls, _, outcome = drive(rounds(max_rounds=2), replies)
    assert [c.offer_zoom for c in calls] == [True, True, False, False] and [c.round for c in calls] == [1, 2, 3, 4]
    system, *rest = calls[-1].messages
    assert rest == START[1:]  # no tool exchange left to imitate
    assert system["content"].startswith("ctx\n\n") and "content of aaaaaaaa01" in system["content"]  # what Consult opened
    assert outcome.reply == {"role": "assistant", "content": "from what I read"} and outcome.rounds == 4
    # a last round with text, or with no zoom round before it, is the answer as it is
    calls, _, outcome = drive(rounds(max_rounds=0), [assistant(content=text)])
    assert len(calls) == 1 and outcome.reply["content"] is None


@pytest.mark.parametrize("text", [None, "", "plain answer", "{not json", '{"name": "get_weather", "arguments": {}}', "[1, 2]", '"pcp_consult"'])
def test_other_text_is_not_a_zoom_call(text: str | None) -> None:
    assert text_call(text, NAMES) is None


def test_a_page_opened_for_this_query_is_not_shelved_again() -> None:
    replies = [
        assistant(call("pcp_consult", {"reason": "r", "ids": [A]})),
        assistant(call("pcp_shelve", {"reason": "done", "ids": [A, B]})),
        assistant(content="the answer"),
    ]
    calls, _, outcome = drive(rounds(state={B: View.DETAIL}), replies)
    result = calls[2].messages[-1]["content"]
    assert result.startswith(f"{A}: not folded: you opened it for this Query") and f"{B}: Detail → Summary" in result
    assert outcome.state == {A: View.DETAIL} and [s.action for s in outcome.steps] == ["Consult", "Shelve"]
    calls, _, outcome = drive(rounds(), [replies[0], assistant(call("pcp_shelve", {"reason": "done", "ids": [A]})), replies[2]])
    assert "Detail → Summary" not in calls[2].messages[-1]["content"] and outcome.state == {A: View.DETAIL}


def test_a_tool_call_echoed_as_the_text_is_one_call() -> None:
    args = {"reason": "r", "ids": [A]}
    echoed = assistant(call("pcp_consult", args), content=json.dumps({"name": "pcp_consult", "arguments": args}))
    calls, _, outcome = drive(rounds(), [echoed, assistant(content="the answer")])
    sent = calls[1].messages
    assert len(sent[-2]["tool_calls"]) == 1 and sent[-2]["content"] is None and sent[-1]["role"] == "tool"
    assert [s.action for s in outcome.steps] == ["Consult"]
