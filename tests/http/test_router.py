"""The relevance router end to end: embeddings + BM25, query reconstruction, and a router model that
may answer, time out, fail or talk nonsense — which changes the choice, never the request's success."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from lxml import etree

from gateway.core.excerpt import ELLIPSIS
from tests.support.fake_upstream import Error, FakeUpstream, Recorded, Reply, Response, Slow
from tests.support.gateway_process import GatewayProcess, gateway_config

FACTS = [
    ("My sister Mara just adopted a greyhound called Pepper.", "Lovely! Greyhounds are gentle; Pepper will need soft bedding."),
    ("I am repainting the kitchen in a pale sage green.", "Sage green works well with oak cupboards and brass handles."),
    ("The quarterly tax filing is due on the 15th of July.", "Set a reminder a week early and gather the receipts."),
    ("We booked a cabin near Lake Tahoe for August.", "Bring layers; nights by the lake get cold even in summer."),
    ("My tomato plants have yellow leaves with brown spots.", "That sounds like early blight; remove the affected leaves."),
    ("I'm learning the chords of Autumn Leaves on guitar.", "Start with the ii-V-I in G minor and keep the voicings close."),
    ("Our team switched the build from Make to Bazel.", "Bazel's remote cache will pay off once the graph is stable."),
    ("I ran a half marathon in 1:52 last Sunday.", "Great time! Rest and hydrate; an easy run midweek helps."),
]


def history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for user, reply in FACTS:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
    return messages


# A pasted log at the start of each conversation: the thread no longer fits the budget whole, so its pages are
# ranked (a thread that fits whole is shown whole, unranked: test_a_thread_that_fits_whole_is_not_ranked). None
# of its words is a question's, or one that places an event in time ("last night" would).
LOG = [
    {"role": "user", "content": "Here is the worker log:\n" + "\n".join(
        f"01:{n // 60:02d}:{n % 60:02d} INFO worker-{n % 7} heartbeat seq={n * 37} queue=depth-{n % 13} ok" for n in range(160)
    )},
    {"role": "assistant", "content": "Every heartbeat is ok; the queue depth stays low."},
]


def is_router_call(recorded: Recorded) -> bool:
    body = recorded.body or {}
    return body.get("model") == "router" or "You select memory pages" in json.dumps(body.get("messages", [])[:1])


def _routed(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory, **pcp: Any) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("routed")
    settings = {"budget_tokens": 3000, "recent_turns": 1, "router_model": "router", "router_timeout_ms": 1500, **pcp}
    config = gateway_config(fake.url, workdir / "data", pcp=settings)
    config["model_list"].append({"model_name": "router", "litellm_params": {"model": "openai/router", "api_base": fake.url, "api_key": "k"}})
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


@pytest.fixture(scope="module")
def routed(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from _routed(fake, tmp_path_factory)


@pytest.fixture(scope="module")
def strict(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The budget held even against the client's own parts: no history when they fill it."""
    yield from _routed(fake, tmp_path_factory, history_floor=0)


def ask(gateway: GatewayProcess, upstream: FakeUpstream, question: str, router: Response | Callable[[Recorded], Response],
        messages: list[dict[str, Any]] | None = None, logged: bool = True) -> tuple[etree._Element, Any]:
    def answer(recorded: Recorded) -> Response:
        if is_router_call(recorded):
            return router(recorded) if callable(router) else router
        return Reply(content="fine")

    upstream.reset()
    upstream.script(answer, answer)
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-r", max_retries=0, default_headers={"X-PCP-Thread": "r-" + uuid.uuid4().hex[:8]})
    asked = [*(LOG if logged else []), *(messages or history()), {"role": "user", "content": question}]
    raw = client.chat.completions.with_raw_response.create(model="fake-model", messages=asked)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "fine"
    main = [r for r in upstream.chat_requests if not is_router_call(r)][-1]
    text = main.body["messages"][0]["content"]  # type: ignore[index]
    return etree.fromstring(text[text.index("<PagedContext") :].encode()), raw


def _entries(root: etree._Element) -> list[tuple[str, str]]:
    """(id, text) of every page shown whole or in part: nodes, and entries of <Background_Context>."""
    nodes = [(n.get("id") or "", n.findtext("Content") or n.findtext("Summary") or "") for n in root.iter("Node")]
    background = root.findtext("Background_Context") or ""
    lines = re.findall(r"^\[([0-9a-f]+)\] (.*(?:\n(?!\[|\d{4}-\d\d-\d\d:).*)*)", background, re.MULTILINE)
    return nodes + [(page, text) for page, text in lines]


def detail_texts(root: etree._Element) -> list[str]:
    """What the model sees of the pages it sees whole: Detail nodes, and lines that hold a short exchange whole."""
    whole = [n.findtext("Content") or "" for n in root.iter("Node") if n.get("view") == "Detail"]
    return whole + [text for _, text in _entries(root) if text.startswith("User: ") and "…" not in text]


def node_id_with(root: etree._Element, needle: str) -> str:
    return next(page for page, text in _entries(root) if needle in text)


def test_the_router_models_choice_decides_the_views(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    root, _ = ask(routed, upstream, "What colour is the kitchen going to be?", Reply(content='{"detail": [], "summary": []}'))
    kitchen = node_id_with(root, "sage green")
    tahoe = node_id_with(root, "Lake Tahoe")
    root, _ = ask(routed, upstream, "What colour is the kitchen going to be?", Reply(content=json.dumps({"detail": [tahoe], "summary": [kitchen]})))
    assert any("Lake Tahoe" in t for t in detail_texts(root))
    router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router_request is not None and "kitchen" in router_request["messages"][1]["content"]


def test_a_thread_that_fits_whole_is_not_ranked(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """Every page of a short thread fits the budget whole: nothing is left to choose, so the router model is not
    asked, and every exchange is shown whole. Once the thread no longer fits (a pasted log), it is asked again."""
    root, _ = ask(routed, upstream, "What colour is the kitchen going to be?", Reply(content='{"detail": [], "summary": []}'), logged=False)
    assert not [r for r in upstream.chat_requests if is_router_call(r)]
    shown = "\n".join(text for _, text in _entries(root))
    assert all(user in shown and reply in shown for user, reply in FACTS[:-1])  # the last exchange follows, verbatim
    root, _ = ask(routed, upstream, "What colour is the kitchen going to be?", Reply(content='{"detail": [], "summary": []}'))
    assert [r for r in upstream.chat_requests if is_router_call(r)]
    assert "sage green" in "\n".join(text for _, text in _entries(root))


def test_a_request_whose_own_parts_fill_the_budget_still_shows_its_best_page(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """A client's system prompt longer than the budget (a coding assistant's prompt, repository map and files) cannot
    keep the budget. The history still gets a quarter of it, chosen as for any request: ranked, the router model
    asked, the best-matching page shown; the request is over budget by the client's own parts and that quarter."""
    rules = {"role": "system", "content": " ".join(f"Rule {n}: keep each function short and name it well." for n in range(400))}
    question = "What colour is the kitchen going to be?"
    _, alone = ask(routed, upstream, question, Reply(content="no idea"), [rules], logged=False)  # the client's own parts
    root, raw = ask(routed, upstream, question, Reply(content="no idea"), [rules, *history()])
    assert [r for r in upstream.chat_requests if is_router_call(r)]
    assert any("sage green" in text for _, text in _entries(root))
    assert raw.headers["x-pcp-over-budget"] == "true" and int(alone.headers["x-pcp-prompt-tokens"]) > 3000
    added = int(raw.headers["x-pcp-prompt-tokens"]) - int(alone.headers["x-pcp-prompt-tokens"])
    assert 0 < added <= 3000 // 4  # the history, with the instructions that explain it


def test_without_a_history_floor_a_request_whose_own_parts_fill_the_budget_is_not_ranked(strict: GatewayProcess, upstream: FakeUpstream) -> None:
    """With `pcp.history_floor: 0` the history has no room when the client's own parts fill the budget: nothing is
    ranked, the router model is not asked, and the request goes upstream with its own parts and no page."""
    rules = {"role": "system", "content": " ".join(f"Rule {n}: keep each function short and name it well." for n in range(400))}
    root, raw = ask(strict, upstream, "What colour is the kitchen going to be?", Reply(content='{"detail": [], "summary": []}'), [rules, *history()])
    assert not [r for r in upstream.chat_requests if is_router_call(r)]
    assert _entries(root) == [] and raw.headers["x-pcp-pages"].startswith("0/")
    assert int(raw.headers["x-pcp-prompt-tokens"]) > 3000 and raw.headers["x-pcp-over-budget"] == "true"


@pytest.mark.parametrize(
    "failure",
    [Slow(3.0, content='{"detail": []}'), Error(500, "router down"), Reply(content="I think page three, maybe?"), Reply(content='{"detail": ["zzzz"]}')],
    ids=["timeout", "error", "prose", "unknown-ids"],
)
def test_a_failing_router_falls_back_to_the_heuristic(routed: GatewayProcess, upstream: FakeUpstream, failure: Response) -> None:
    before = router_fallbacks(routed)
    root, raw = ask(routed, upstream, "When is the quarterly tax filing due?", failure)
    assert any("quarterly tax filing" in t for t in detail_texts(root))  # the heuristic's first pick
    assert float(raw.headers["x-pcp-router-ms"]) < 2900  # bounded by the 1.5 s router timeout, not the 3 s reply
    deadline = time.monotonic() + 10  # the request is counted just after its last byte is sent
    while (counted := router_fallbacks(routed)) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counted == before + 1


def router_fallbacks(gateway: GatewayProcess) -> float:
    """`pcp_router_model_fallbacks_total` for the chat model."""
    text = httpx.get(gateway.root_url + "/metrics").text
    found = re.search(r'^pcp_router_model_fallbacks_total\{model="fake-model"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def test_semantic_match_finds_a_page_without_shared_words(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> None:
    workdir = tmp_path_factory.mktemp("semantic")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": 3000, "recent_turns": 1})
    with GatewayProcess(config=config, workdir=workdir) as gateway:
        root, _ = ask(gateway, upstream, "What breed is the new pet dog in the family?", Reply(content="unused"))
        assert any("greyhound" in t for t in detail_texts(root))
        # a low-information follow-up is matched with the previous block's summary: the last turn was about guitar
        messages = [*history(), {"role": "user", "content": "Which chord voicings for Autumn Leaves?"}, {"role": "assistant", "content": "Drop-2 voicings."}]
        root, _ = ask(gateway, upstream, "and then?", Reply(content="unused"), messages)
        assert any("Autumn Leaves" in t for t in detail_texts(root))


ADVICE = (
    "For portraits a fast lens matters more than the camera: buy a lens with a wide aperture before you buy a new "
    "camera. A 50mm lens or an 85mm lens on any camera body gives soft backgrounds; if you buy one lens, buy the 85mm "
    "lens. Keep the camera at eye level and let the lens do the work."
)


def test_a_question_about_the_user_is_matched_on_what_the_user_said(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """Long replies that repeat the question's words (lens advice) must not outrank the user's own one-line
    mention of the answer: a first-person question is matched on the user's messages."""
    messages = history()[:8]
    messages += [{"role": "user", "content": "Any tips for portraits indoors?"}, {"role": "assistant", "content": ADVICE}]
    messages += [{"role": "user", "content": "And for landscapes at dawn?"}, {"role": "assistant", "content": ADVICE.replace("portraits", "landscapes")}]
    messages += history()[8:]
    messages += [{"role": "user", "content": "I bought the Sigma 35mm lens for my camera yesterday."}, {"role": "assistant", "content": "Great choice!"}]
    messages += [{"role": "user", "content": "What should I cook tonight?"}, {"role": "assistant", "content": "A risotto."}]
    root, _ = ask(routed, upstream, "Which lens did I buy for my camera?", Reply(content='{"detail": [], "summary": []}'), messages)
    sigma = node_id_with(root, "Sigma 35mm")
    router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router_request is not None
    shortlist = re.findall(r"^- id=([0-9a-f]+)", router_request["messages"][1]["content"], re.MULTILINE)
    assert shortlist[0] == sigma  # the shortlist is in relevance order
    # a question about the assistant's advice is still matched on everything said
    root, _ = ask(routed, upstream, "Which lens did you tell me to buy for portraits?", Reply(content='{"detail": [], "summary": []}'), messages)
    router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router_request is not None
    shortlist = re.findall(r"^- id=([0-9a-f]+)", router_request["messages"][1]["content"], re.MULTILINE)
    assert shortlist[0] == node_id_with(root, "Any tips for portraits")


TRIP = [
    {"role": "user", "content": (
        "Can you help me plan a road trip from Denver to Moab in October? I'd like a stop every two hours and a "
        "list of scenic overlooks on the way. We will camp for two nights near Arches. "
        "By the way, I just got a smoker today and I can't wait to try it out."
    )},
    {"role": "assistant", "content": (
        "Take I-70 west: stop in Glenwood Springs, then Grand Junction, then Green River. Overlooks: Dead Horse "
        "Point, the Colorado River scenic byway (route 128) and Delicate Arch at sunset. Book the Devils Garden "
        "campground early; October nights drop near freezing, so bring warm sleeping bags."
    )},
]
COOKING = [{"role": "user", "content": "What should I cook tonight?"}, {"role": "assistant", "content": "A mushroom risotto."}]


def test_a_fact_said_in_passing_is_matched_on_its_own_sentence(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """A long request with an aside ("by the way, I just got a smoker") is embedded as a whole about a road trip;
    the aside's own sentence is what a question about the user's new appliance matches."""
    messages = [*history()[:8], *TRIP, *history()[8:], *COOKING]
    root, _ = ask(routed, upstream, "What barbecue equipment did I buy recently?", Reply(content='{"detail": [], "summary": []}'), messages)
    router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router_request is not None
    shortlist = re.findall(r"^- id=([0-9a-f]+)", router_request["messages"][1]["content"], re.MULTILINE)
    assert shortlist[0] == node_id_with(root, "road trip from Denver")


def test_the_words_that_place_a_question_in_time_are_not_matched(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """"Two weeks ago" names a date, not what was said: its words must not pull the question towards the page
    that talks about weeks (the gardening the user did then says "today")."""
    weeks = [{"role": "user", "content": "Can you plan my meals for the next two weeks? I cook on weekdays only."},
             {"role": "assistant", "content": "Week one: soups and stews. Week two: salads and grain bowls."}]
    saplings = [{"role": "user", "content": "I planted twelve tomato saplings in the raised bed today."},
                {"role": "assistant", "content": "Nice! Water them deeply and stake them early."}]
    messages = [*history()[:4], *weeks, *history()[4:8], *saplings, *history()[10:], *COOKING]
    root, _ = ask(routed, upstream, "What gardening did I do two weeks ago?", Reply(content='{"detail": [], "summary": []}'), messages)
    router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router_request is not None and "two weeks ago" not in router_request["messages"][1]["content"]
    shortlist = re.findall(r"^- id=([0-9a-f]+)", router_request["messages"][1]["content"], re.MULTILINE)
    assert shortlist.index(node_id_with(root, "tomato saplings")) < shortlist.index(node_id_with(root, "next two weeks"))


def _ranked_when_asked(routed: GatewayProcess, upstream: FakeUpstream, sessions: list[tuple[str, list[dict[str, Any]]]],
                       question: str, asked_at: list[str]) -> list[list[str]]:
    """Replays ``sessions`` into a new thread (each sent whole on its day, as a replayed conversation is), then
    asks ``question`` at each time of ``asked_at``: the router model's shortlist for each, best first."""
    thread = "r-" + uuid.uuid4().hex[:8]
    client = openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0)
    upstream.reset()
    messages: list[dict[str, Any]] = list(LOG)
    for when, turns in sessions:
        messages += turns
        upstream.script(Reply(content="fine"))
        client.chat.completions.create(model="fake-model", messages=messages, extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": when})  # type: ignore[arg-type]
    ranked = []
    for when in asked_at:
        upstream.reset()
        upstream.script(Reply(content='{"detail": [], "summary": []}'), Reply(content="fine"))
        asked = [*messages, {"role": "user", "content": question}]
        client.chat.completions.create(model="fake-model", messages=asked, extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": when})  # type: ignore[arg-type]
        router_request = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
        assert router_request is not None
        ranked.append(router_request["messages"][1]["content"].split("\n- id=")[1:])
    return ranked


def test_a_question_that_dates_what_it_asks_prefers_the_pages_of_that_day(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """Two purchases told the same way on different days: "what did I buy 10 days ago?" ranks first the one
    written ten days before the question, whichever day that is (the dates are the sessions' X-PCP-Time)."""
    sessions = [
        ("2023-03-01T10:00:00Z", history()[:8]),
        ("2023-03-05T10:00:00Z", [{"role": "user", "content": "I just got a cast iron pan for the kitchen today."},
                                  {"role": "assistant", "content": "Season it well before the first use."}]),
        ("2023-03-09T10:00:00Z", history()[8:]),
        ("2023-03-12T10:00:00Z", [{"role": "user", "content": "I just got an electric kettle for the kitchen today."},
                                  {"role": "assistant", "content": "Descale it every month if your water is hard."}]),
        ("2023-03-18T10:00:00Z", COOKING),
    ]
    later, earlier = _ranked_when_asked(routed, upstream, sessions, "What did I buy for the kitchen 10 days ago?",
                                        ["2023-03-22T09:00:00Z", "2023-03-15T09:00:00Z"])
    assert "kettle" in later[0] and "cast iron pan" in earlier[0]


def test_of_a_named_days_pages_those_that_tell_of_its_events_come_first(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """Two sessions on the day "10 days ago" names: one asks what to buy for the kitchen (more of the question's
    words), the other tells of a purchase made that day ("today"). The one that tells of the day's event ranks
    first: a day that holds many sessions holds few that tell what happened on it."""
    sessions = [
        ("2023-03-01T10:00:00Z", history()[:8]),
        ("2023-03-12T09:00:00Z", [{"role": "user", "content": "What should I buy to organize my kitchen? The kitchen drawers are a mess."},
                                  {"role": "assistant", "content": "Drawer dividers and a lazy susan for the kitchen cabinets."}]),
        ("2023-03-12T15:00:00Z", [{"role": "user", "content": "By the way, I got a stand mixer for the kitchen today. Any cake recipes?"},
                                  {"role": "assistant", "content": "A classic sponge is a good start."}]),
        ("2023-03-18T10:00:00Z", COOKING),
    ]
    [ranked] = _ranked_when_asked(routed, upstream, sessions, "What did I buy for the kitchen 10 days ago?", ["2023-03-22T09:00:00Z"])
    assert "stand mixer" in ranked[0] and "organize my kitchen" in "".join(ranked[1:])


@pytest.mark.parametrize(("question", "telling", "other"), [
    # a state that lasts until now is told as a duration
    ("How long have I been at the company?", "Time flies: 3 years and 9 months at the company already.",
     "I love the company and the people at the company."),
    # a page's date answers "when" only if the page says how what it tells stands to its day
    ("When did I go to the support group?", "Yesterday was really moving: a support group, then a long walk.",
     "I love to go to the support group: everyone at the support group listens."),
], ids=["how-long-a-duration", "when-a-time-word"])
def test_a_question_that_says_what_its_answer_looks_like_prefers_the_pages_that_look_like_it(
    routed: GatewayProcess, upstream: FakeUpstream, question: str, telling: str, other: str
) -> None:
    """Two messages about the same thing: the one in the answer's form ("3 years and 9 months" for "how long
    have…", "yesterday" for "when did…") ranks first, though the other shares more of the question's words."""
    sessions = [("2023-03-01T10:00:00Z", [
        *history()[:6],
        {"role": "user", "content": other},
        {"role": "assistant", "content": "That makes a real difference."},
        *history()[6:12],
        {"role": "user", "content": telling},
        {"role": "assistant", "content": "Good to hear."},
        *history()[12:],
    ])]
    [ranked] = _ranked_when_asked(routed, upstream, sessions, question, ["2023-03-02T09:00:00Z"])
    assert telling in ranked[0] and other in ranked[1]


FRIENDS = [
    ("Thanks, Melanie! Work was busy, I spent the week on the new counseling course.", "Caroline, that sounds like a lot. Did you sleep at all?"),
    ("Melanie, guess what: I painted a lighthouse at sunset on my balcony.", "Caroline, how lovely! My kids and I built sandcastles on the beach all day long."),
    ("Not much else, Melanie. I read two chapters of my book.", "Caroline, which book? I keep meaning to start one."),
    ("The one about the history of tea, Melanie.", "Caroline, you always find the best books."),
    ("Thanks, Melanie! How was the camping trip?", "Caroline, it rained, but the kids loved the tent."),
    ("Melanie, did you finish the pottery class?", "Caroline, yes! I made a bowl for the fruit."),
]


def test_a_question_about_a_named_participant_is_held_by_their_messages(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """Two people chatting: each calls the other by name and never themselves, so "Caroline" names the user's
    side. A question about what Caroline did is answered by her messages: the page that matches is cut to her
    message, with "…" for her friend's reply, where a line would show both."""
    messages: list[dict[str, Any]] = []
    for week in range(4):  # distinct pages: a page is stored once per content
        for mine, theirs in FRIENDS:
            messages += [{"role": "user", "content": f"{mine} (week {week})"}, {"role": "assistant", "content": theirs}]
    messages += [{"role": "user", "content": "Thanks, Melanie."}, {"role": "assistant", "content": "Anytime, Caroline."}]
    client = openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0)
    thread = "r-" + uuid.uuid4().hex[:8]

    def shown(question: str) -> str:
        upstream.reset()
        upstream.script(Reply(content='{"detail": [], "summary": []}'), Reply(content="fine"))
        client.chat.completions.create(model="fake-model", messages=[*messages, {"role": "user", "content": question}],  # type: ignore[arg-type]
                                       extra_headers={"X-PCP-Thread": thread, "X-PCP-Budget": "700"})
        main = [r for r in upstream.chat_requests if not is_router_call(r)][-1]
        text = main.body["messages"][0]["content"]  # type: ignore[index]
        return next(entry for _, entry in _entries(etree.fromstring(text[text.index("<PagedContext"):].encode())) if "lighthouse" in entry)

    about_her = shown("What did Caroline paint on her balcony?")
    assert "lighthouse" in about_her and "sandcastles" not in about_her and ELLIPSIS in about_her
    about_anyone = shown("What was painted on the balcony?")
    assert "lighthouse" in about_anyone and "sandcastles" in about_anyone  # the whole line: anyone's messages


def _labelled(user: str, assistant: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Emi: {user}"}, {"role": "assistant", "content": f"Elise: {assistant}"}]


def test_a_participant_named_by_the_label_of_their_lines_is_asked_about_by_what_they_said(
    routed: GatewayProcess, upstream: FakeUpstream
) -> None:
    """A chat exported as ``Name: text`` lines, in which neither calls the other by name: the labels say who is who.
    A name that labels a speaker's lines is in no page's terms or embedding, so it is not matched in a question
    either: asking what Emi painted or what Elise painted ranks the pages alike, the two paintings first (a name
    in the embedded question would pull it towards whatever its vector is near). What the name decides is whose
    words answer: the page is cut to what the one named said."""
    turns = [
        *(m for user, reply in FACTS[:2] for m in _labelled(user, reply)),
        *_labelled("This weekend I painted a lighthouse on the garden fence.", "Nice."),
        *(m for user, reply in FACTS[2:5] for m in _labelled(user, reply)),
        *_labelled("Nice! And you?", "This weekend I painted a fox on the garden fence."),
        *(m for user, reply in FACTS[5:8] for m in _labelled(user, reply)),
    ]
    emi, elise = (_ranked_when_asked(routed, upstream, [("2023-03-01T09:00:00Z", turns)], f"What did {name} paint?",
                                     ["2023-03-02T09:00:00Z"])[0] for name in ("Emi", "Elise"))
    assert [line.split()[0] for line in emi] == [line.split()[0] for line in elise]
    assert "painted" in emi[0] and "painted" in emi[1]
    upstream.script(Reply(content='{"detail": [], "summary": []}'), Reply(content="fine"))
    openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0).chat.completions.create(
        model="fake-model", messages=[*LOG, *turns, {"role": "user", "content": "What did Elise paint?"}],  # type: ignore[arg-type]
        extra_headers={"X-PCP-Thread": "r-" + uuid.uuid4().hex[:8], "X-PCP-Budget": "700"})
    text = [r for r in upstream.chat_requests if not is_router_call(r)][-1].body["messages"][0]["content"]  # type: ignore[index]
    fox = next(entry for _, entry in _entries(etree.fromstring(text[text.index("<PagedContext"):].encode())) if "fox" in entry)
    assert "And you?" not in fox and ELLIPSIS in fox


TOPICS = ["list the keys", "set a TTL", "rename a key", "count the members of a set", "trim a list", "watch a key",
          "pipeline commands", "publish a message", "scan a hash", "increment a counter", "expire a session",
          "sort a list", "store a bitmap", "cap a stream", "flush one database", "pick a random key", "move a key",
          "check the memory", "lock a resource", "read the slow log"]


def test_a_name_only_the_side_that_talks_more_repeats_is_no_participant(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """An assistant whose replies are ten times the user's questions says every word more often: "Redis" in
    each of its replies and in one of the user's messages is a topic, not the user's name, though said in twenty
    times as many pages. A question about it is answered by anyone's messages: the page that matches shows the
    reply, where a question about the user would be cut to the user's message."""
    filler = "It is one command, it is atomic, and it returns at once; the docs list the options, and the defaults are sane."
    messages: list[dict[str, Any]] = []
    for n, topic in enumerate(TOPICS):
        asked = f"How do I {topic}" + (" in redis?" if n == 3 else "?")
        messages += [{"role": "user", "content": asked},
                     {"role": "assistant", "content": f"In Redis you {topic} with a single call. {filler} {filler} {filler}"}]
        if n == 9:
            messages += [{"role": "user", "content": "And keeping the cache across restarts?"},
                         {"role": "assistant", "content": "Redis can log every write to an append-only file (appendonly yes in "
                          f"redis.conf) and replay it when the server starts again. {filler} {filler}"}]
    client = openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0)
    upstream.reset()
    upstream.script(Reply(content='{"detail": [], "summary": []}'), Reply(content="fine"))
    client.chat.completions.create(model="fake-model", messages=[*messages, {"role": "user", "content": "How does Redis keep data across restarts?"}],  # type: ignore[arg-type]
                                   extra_headers={"X-PCP-Thread": "r-" + uuid.uuid4().hex[:8], "X-PCP-Budget": "700"})
    main = [r for r in upstream.chat_requests if not is_router_call(r)][-1]
    text = main.body["messages"][0]["content"]  # type: ignore[index]
    entry = next(entry for _, entry in _entries(etree.fromstring(text[text.index("<PagedContext"):].encode())) if "restarts" in entry)
    assert "appendonly yes" in entry


def test_an_exchange_is_dated_by_the_request_that_asked_it(routed: GatewayProcess, upstream: FakeUpstream) -> None:
    """A client sends a question live; the exchange it opens is stored by the next request, which may come days
    later. The page takes the time its question was asked (a retry of the same question keeps the first time)."""
    thread = "r-" + uuid.uuid4().hex[:8]
    client = openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0)
    smoker = {"role": "user", "content": "I just got a smoker today, any wood to try first?"}
    messages: list[dict[str, Any]] = [*history()[:4]]
    upstream.reset()
    for when in ("2023-03-15T19:00:00Z", "2023-03-15T19:05:00Z"):  # asked, then retried
        upstream.script(Reply(content="Start with hickory."))
        client.chat.completions.create(model="fake-model", messages=[*messages, smoker], extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": when})  # type: ignore[arg-type]
    messages += [smoker, {"role": "assistant", "content": "Start with hickory."}]
    upstream.script(Reply(content="Enjoy."))
    client.chat.completions.create(model="fake-model", messages=[*messages, {"role": "user", "content": "Thanks!"}],  # type: ignore[arg-type]
                                   extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": "2023-03-18T08:00:00Z"})
    response = httpx.get(f"{routed.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-r"})
    assert response.status_code == 200, response.text
    dated = {page["summary"].split("\n")[0]: page["timestamp"][:16] for page in response.json()["pages"]}
    assert dated[next(s for s in dated if "smoker" in s)] == "2023-03-15T19:00"
    # the exchanges stored by the first request keep its time; none is dated after the smoker
    assert all(t <= "2023-03-15T19:00" for t in dated.values())


@pytest.mark.parametrize(("replied_at", "dated"), [("2023-03-16T09:00:00Z", "2023-03-16T09:00"), ("2023-03-15T19:10:00Z", "2023-03-15T19:00")])
def test_a_reply_that_opens_a_later_sitting_is_dated_by_it(routed: GatewayProcess, upstream: FakeUpstream, replied_at: str, dated: str) -> None:
    """A two-person chat replayed as one thread: the other speaker (the assistant's role) answers the question the
    next morning, opening that session. The gateway's own answer was something else, so the exchange is dated by
    the request that first carried the reply; within the sitting (ten minutes later) it keeps the question's time."""
    thread = "r-" + uuid.uuid4().hex[:8]
    client = openai.OpenAI(base_url=routed.base_url, api_key="sk-r", max_retries=0)
    asked = {"role": "user", "content": "Did you find a smoker for the garden?"}
    messages: list[dict[str, Any]] = [*history()[:4], asked]
    upstream.reset()
    upstream.script(Reply(content="I can help you choose one."))
    client.chat.completions.create(model="fake-model", messages=messages, extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": "2023-03-15T19:00:00Z"})  # type: ignore[arg-type]
    messages += [{"role": "assistant", "content": "Yes! I got a smoker this morning, an offset one."}, {"role": "user", "content": "Nice, which wood?"}]
    upstream.script(Reply(content="Hickory."))
    client.chat.completions.create(model="fake-model", messages=messages, extra_headers={"X-PCP-Thread": thread, "X-PCP-Time": replied_at})  # type: ignore[arg-type]
    response = httpx.get(f"{routed.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-r"})
    assert response.status_code == 200, response.text
    pages = response.json()["pages"]
    assert next(p["timestamp"][:16] for p in pages if "smoker" in p["summary"]) == dated
    assert all(p["timestamp"][:16] <= "2023-03-15T19:00" for p in pages if "smoker" not in p["summary"])


def test_ingest_embeds_the_users_own_words_beside_the_whole_page(fake: FakeUpstream, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> None:
    import redis

    from gateway.adapters.embedded_redis import EmbeddedRedis
    from gateway.adapters.manifests import decode_vector

    workdir = tmp_path_factory.mktemp("own-words")
    server = EmbeddedRedis(workdir / "redis")
    url, prefix = server.start(), "pcpown"
    try:
        config = gateway_config(fake.url, workdir / "data", store={"redis_url": url, "key_prefix": prefix}, pcp={"consolidation": False})
        with GatewayProcess(config=config, workdir=workdir) as gateway:
            ask(gateway, upstream, "Which lens did I buy?", Reply(content="unused"), [*history(), *TRIP], logged=False)
        store = redis.Redis.from_url(url, decode_responses=True)
        fields = {k: v for key in store.scan_iter(match=f"{prefix}:*:vector") for k, v in store.hgetall(key).items()}
        pages = [k for k in fields if ":" not in k]
        several = [k.removesuffix(":sentences") for k in fields if k.endswith(":sentences")]
        assert len(pages) == len(FACTS) + 1 and set(fields) == {*pages, *(f"{p}:user" for p in pages), *(f"{p}:sentences" for p in several)}
        for page_id in pages:
            page, mine = decode_vector(fields[page_id]), decode_vector(fields[f"{page_id}:user"])
            assert page.shape == mine.shape and float(page @ mine) < 0.99  # two different texts were embedded
        # only the message of several sentences has theirs, one embedding each, each unlike the message's
        assert len(several) == 1
        rows = decode_vector(fields[f"{several[0]}:sentences"]).reshape(-1, 384)
        mine = decode_vector(fields[f"{several[0]}:user"])
        assert len(rows) == 4 and all(float(row @ mine) < 0.99 for row in rows)
    finally:
        server.stop()
