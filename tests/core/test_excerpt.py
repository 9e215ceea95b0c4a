from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.asked import named_side, participants, query_source
from gateway.core.excerpt import ELLIPSIS, OTHERS_SHARE, UNIT_TOKENS, excerpt_options, leading_options, line_coverage, names_sides, render_excerpt, sentences, shown_content, units_of
from gateway.core.lexical import idf_weights, terms
from gateway.core.tokens import TokenCounter

COUNT = TokenCounter().count

BURST = "\n".join(
    [
        "user: hey there",
        "user: I went hiking at Mount Rainier yesterday. It was great.",
        "user: how are you",
        "assistant: good! I painted a sunset.",
        "assistant: also adopted a dog named Max",
    ]
)


FILLER = [f"user: small talk number {k} about nothing in particular today" for k in range(25)]
LONG_BURST = "\n".join(FILLER[:10] + BURST.split("\n")[1:3] + FILLER[10:] + BURST.split("\n")[3:])


def weights(query: str) -> dict[str, float]:
    return {term: 1.0 for term in terms(query)}


def test_a_speakers_short_run_of_messages_is_one_unit() -> None:
    rows = BURST.split("\n")
    units = units_of(BURST, COUNT)
    assert [u.text for u in units] == ["\n".join(rows[:3]), "\n".join(rows[3:])]
    assert [u.speaker for u in units] == ["user:", "assistant:"] and all(u.first for u in units)


def test_a_long_run_is_split_into_its_messages() -> None:
    units = units_of(LONG_BURST, COUNT)
    assert [u.text for u in units][:-1] == LONG_BURST.split("\n")[:-2]  # every user message on its own
    assert units[-1].text == "\n".join(BURST.split("\n")[3:])  # the short assistant run stays whole
    assert all(u.first and u.joiner == "\n" for u in units)
    multi = units_of("user: line one\nline two\nassistant → tool call f({})\ntool f result: 42", COUNT)
    assert [u.text for u in multi] == ["user: line one\nline two", "assistant → tool call f({})", "tool f result: 42"]


def test_a_long_message_is_split_into_lines_and_a_long_line_into_sentences() -> None:
    long_line = " ".join(f"Sentence {i} is about topic{i}." for i in range(80))
    content = f"user: which boots?\nassistant: {long_line}\nBoots for hiking are best.\nThe end."
    units = units_of(content, COUNT)
    assert units[0].text == "user: which boots?" and units[0].tokens <= UNIT_TOKENS
    reply = [u for u in units if u.message == 1]
    assert reply[0].first and reply[0].text.startswith("assistant: Sentence 0") and all(not u.first for u in reply[1:])
    assert "".join(u.joiner + u.text for u in reply).lstrip("\n") == content.split("\n", 1)[1]  # verbatim, in order
    assert all(u.tokens <= UNIT_TOKENS for u in units)


def test_an_excerpt_keeps_the_matching_messages_verbatim_and_marks_what_was_left_out() -> None:
    units = units_of(LONG_BURST, COUNT)
    hiking = next(i for i, u in enumerate(units) if "hiking" in u.text)
    options = excerpt_options(units, weights("Which mountain did she hike? Which dog?"), COUNT)
    everything = tuple(range(len(units)))
    last = len(units) - 1
    # nested, best first: the two matching units, then the message after the match (it may answer it), then whole
    assert [o.chosen for o in options] == [(hiking,), (hiking, last), (hiking, hiking + 1, last), everything]
    assert options[0].text == f"{ELLIPSIS}\n{BURST.split(chr(10))[1]}\n{ELLIPSIS}"
    assert options[1].text.endswith("assistant: good! I painted a sunset.\nassistant: also adopted a dog named Max")
    assert options[0].tokens == COUNT(options[0].text)
    assert 0 < options[0].coverage < options[1].coverage < options[2].coverage < options[3].coverage == 1
    assert options[3].text == LONG_BURST and ELLIPSIS not in options[3].text  # the page verbatim, nothing left out
    assert excerpt_options(units, weights("quantum chromodynamics"), COUNT) == ()
    assert excerpt_options(units_of("user: hiking", COUNT), weights("hiking"), COUNT) == ()


def test_a_unit_from_inside_a_message_says_who_said_it() -> None:
    long_line = " ".join(f"Sentence {i} is about topic{i}." for i in range(80))
    units = units_of(f"user: which boots?\nassistant: {long_line}\nBoots for hiking are best.\nThe end.", COUNT)
    matching = [i for i, u in enumerate(units) if "topic7." in u.text or "Boots" in u.text]
    text = render_excerpt(units, matching)
    assert text == f"{ELLIPSIS}\nassistant: {ELLIPSIS} Sentence 7 is about topic7. {ELLIPSIS} Boots for hiking are best. {ELLIPSIS}"
    assert render_excerpt(units, [0, 1, 2]).startswith("user: which boots?\nassistant: Sentence 0 is about topic0. Sentence 1")
    assert render_excerpt(units, []) == ""


def test_coverage_follows_the_query_only_as_far_as_the_page_matches_it() -> None:
    units = units_of(LONG_BURST, COUNT)
    # the page holds all of the query: the matching message and the one after it (which may answer it) are all its
    # worth, two thirds and one third
    strong = excerpt_options(units, weights("hiking Rainier"), COUNT)[0].coverage
    assert excerpt_options(units, weights("hiking Rainier"), COUNT)[1].coverage == pytest.approx(1.0)
    # the page shares one word of four with the query: the message holding it is worth about its size
    weak = excerpt_options(units, weights("hiking boots glacier crampons"), COUNT)[0].coverage
    size = next(u for u in units if "hiking" in u.text).tokens / sum(u.tokens for u in units)
    assert strong == pytest.approx(2 / 3) and size < weak < strong


def test_line_coverage_counts_the_units_the_line_quotes() -> None:
    units = units_of("\n".join(BURST.split("\n")[1:2] + FILLER + BURST.split("\n")[3:]), COUNT)
    line = "[a1b2c3d4e5] User: I went hiking at Mount Rainier yesterday. It was great. small talk number 0 about …"
    covered = line_coverage(units, weights("hiking"), line)
    # the page holds the whole query; the line holds the message that matches, not all of the one after it
    assert covered == pytest.approx(2 / 3)
    assert line_coverage(units, weights("hiking"), "[a1b2c3d4e5] User: small talk …") == 0.0
    assert line_coverage(units, {}, line) == units[0].tokens / sum(u.tokens for u in units)


def test_idf_weights_ignore_terms_no_page_has() -> None:
    documents = [{"hike": 1}, {"hike": 2, "dog": 1}, {"cat": 1}]
    found = idf_weights(["hike", "dog", "unicorn", "hike"], documents)
    assert set(found) == {"hike", "dog"} and found["dog"] > found["hike"] > 0


def test_a_reply_that_says_the_questions_words_holds_them_as_the_question_does() -> None:
    content = "\n".join(
        [
            "user: my parents have been staying with me in the US for nine months",
            "assistant: Here is what the process looks like.",
            "Parents staying in the US need a valid visa.",
            "A green card takes about a year.",
            "Green card fees changed last spring.",
            *(f"Step {k}: keep a copy of form {k} and its receipt in a safe folder." for k in range(12)),
        ]
    )
    units = units_of(content, COUNT)
    echo = next(i for i, u in enumerate(units) if u.text.startswith("Parents staying"))
    query = weights("How long have my parents been staying in the US? green card")
    options = excerpt_options(units, query, COUNT)
    # the reply's line that repeats the user's words is as likely to hold the answer as the user's message: it is
    # weighed by the words it says, not by its tokens alone (on real chats and LongMemEval, +0.009 and +0.016 at 2k)
    at = next(k for k, o in enumerate(options) if echo in o.chosen)
    assert at < len(options) - 1  # an excerpt, not only the page whole
    gained = options[at].coverage - (options[at - 1].coverage if at else 0.0)
    assert gained > units[echo].tokens / sum(u.tokens for u in units)
    # the steps say none of the question's words: only the one after a matching line may come before the page whole
    later_steps = {i for i, u in enumerate(units) if u.text.startswith("Step") and not u.text.startswith("Step 0")}
    assert all(not later_steps & set(o.chosen) for o in options[:-1])


def test_a_question_about_the_user_is_answered_from_the_users_own_messages() -> None:
    assert query_source("What type of camera lens did I purchase most recently?") == "user"
    assert query_source("How long have my parents been staying with me?") == "user"
    # it asks what the assistant said, or about other people: anyone's messages may hold it
    assert query_source("Which sealant did you recommend I use for the vase?") is None
    assert query_source("What has Melanie painted?") is None
    # how to do something: the answer is the assistant's instructions, even when the user did it
    assert query_source("How did I fix the import error in the migration script?") is None
    assert query_source("how to rerun the failed job") is None
    assert query_source("How long have I been working in my current role?") == "user"


def test_a_reply_that_only_repeats_the_query_words_holds_nothing_of_a_question_about_the_user() -> None:
    content = "\n".join(
        [
            "user: I want to take better photos of birds this spring, any ideas?",
            "assistant: Here are a few ideas.",
            *(f"Tip {k}: practise with your lens on a tripod at dawn, when the light is soft." for k in range(10)),
        ]
    )
    units = units_of(content, COUNT)
    query = "Which lens did I buy for my camera?"
    anyone = excerpt_options(units, weights(query), COUNT)
    mine = excerpt_options(units, weights(query), COUNT, query_source(query))
    # anyone's: every tip holds "lens", a third of the query's words: two tips are worth more than their size; the
    # user's: a fact about the user is in the user's words, and a tip holds none of them: the ten tips together are
    # worth a tenth of the user's one message
    assert anyone[1].coverage > sum(units[i].tokens for i in anyone[1].chosen) / sum(u.tokens for u in units)
    others = OTHERS_SHARE / (1 + OTHERS_SHARE)
    assert all(0 < option.coverage < others for option in mine[:-1]) and mine[-1].coverage == 1.0  # but the page whole
    # so the line that holds the user's message holds nearly all the page is worth to this question
    line = "[a1b2c3d4e5] User: I want to take better photos of birds this spring, any ideas? Assistant: …"
    assert line_coverage(units, weights(query), line, "user") == pytest.approx(1 - others)
    assert line_coverage(units, weights(query), line) < units[0].tokens / sum(u.tokens for u in units)  # anyone's


def test_long_excerpts_are_estimated_close_to_their_real_size() -> None:
    lines = [f"Point {k}: the hiking trail number {k} climbs {k * 100} metres through forest {k}." for k in range(40)]
    units = units_of("user: which hiking trails?\nassistant: " + "\n".join(lines), COUNT)
    options = excerpt_options(units, weights("hiking trail"), COUNT)
    assert len(options) > 8  # more than the exactly counted ones
    for option in options[8:]:
        real = COUNT(option.text)
        assert real <= option.tokens <= 1.1 * real  # errs high, by a little
    assert all(option.tokens < sum(u.tokens for u in units) for option in options[:-1])  # shorter than the page
    assert options[-1].chosen == tuple(range(len(units)))  # but the last, the page whole



def test_sentences_splits_lines_then_sentences_and_drops_empty_ones() -> None:
    text = "Can you help me plan a trip? We camp two nights.\n\nBy the way, I just got a smoker!  \nThanks"
    assert sentences(text) == ["Can you help me plan a trip?", "We camp two nights.", "By the way, I just got a smoker!", "Thanks"]
    assert sentences("one line, no full stop") == ["one line, no full stop"]
    assert sentences("") == []


def test_a_participant_is_known_by_who_says_their_name() -> None:
    # pages where the user says each term, and pages where only the others do (thread of 200 pages)
    said = {"carolin": (1, 128), "melani": (96, 2), "paint": (40, 35), "mel": (2, 2)}.get

    def source(query: str) -> str | None:
        return named_side(participants(query, lambda term: said(term) or (0, 0), 200, lambda: (5000, 5000)))

    assert source("What did Caroline paint last year?") == "user"  # the other side calls the user Caroline
    assert source("Where did Melanie go camping?") == "assistant"
    assert source("Did Caroline and Melanie both paint?") is None  # both sides: anyone's messages
    assert source("What did Mel say?") is None  # too rare to tell
    assert source("What did she paint?") is None
    assert participants("What did Caroline paint?", lambda term: (0, 3), 1000, lambda: (5000, 5000)) == {}  # 3 of 1,000 pages: not a name said often
    assert participants("Did Caroline and Melanie both paint?", lambda term: said(term) or (0, 0), 200, lambda: (5000, 5000)) == {
        "caroline": "user", "melanie": "assistant"}


def test_a_name_that_labels_one_sides_lines_names_that_side() -> None:
    # a chat exported as "Name: text": a speaker's own name labels their lines (set aside for matching) and is seldom
    # said; another name for the same person (a nickname) is still learnt from who says it
    said = {"kate": (1, 40)}.get
    labelled = {"elise": "assistant", "emi": "user"}

    def source(query: str) -> str | None:
        return named_side(participants(query, lambda term: said(term) or (0, 0), 200, lambda: (5000, 5000), labelled))

    assert source("What did Elise paint?") == "assistant"
    assert source("Where does Emi work?") == "user"
    assert source("Where does Kate work?") == "user"
    assert source("Did Kate and Elise both paint?") is None  # both sides: anyone's messages
    assert source("Did Emi and Kate both paint?") == "user"  # two names of one side
    assert participants("What did Elise paint?", lambda term: (0, 0), 200, lambda: (5000, 5000)) == {}  # no labels


def test_a_word_said_more_by_the_side_that_says_more_is_not_a_name() -> None:
    # an assistant's replies seven times as long as the user's messages: "life" in 34 of its pages, in 2 of the
    # user's — ten times as many pages, not ten times as often per word; "Caroline" in 200 to none is a name
    said = {"life": (2, 34), "carolin": (0, 200), "tanqueray": (0, 8)}.get

    def source(query: str, words: tuple[int, int]) -> str | None:
        return named_side(participants(query, lambda term: said(term) or (0, 0), 400, lambda: words))

    assert source("Which chapter of Spiritual Life covers prayer?", (2000, 14000)) is None
    assert source("Which chapter of Spiritual Life covers prayer?", (7000, 7000)) == "user"  # as much said on each side
    assert source("What did Caroline paint last year?", (2000, 14000)) == "user"
    # never said by the user, but in 8 pages only: as likely a word the user has had no reason to say yet
    assert source("What does Tanqueray say about prayer?", (7000, 7000)) is None
    # the user who says more: a word of theirs is held to the same rate
    assert participants("Where is Melanie?", lambda term: (30, 2), 400, lambda: (14000, 2000)) == {}
    assert participants("Where is Melanie?", lambda term: (30, 2), 400, lambda: (2000, 2000)) == {"melanie": "assistant"}


def test_the_line_of_a_code_block_that_says_what_else_the_query_asks_comes_first() -> None:
    names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    code = "\n".join(f"    total_{name} = compute_total(rows, '{name}')  # step: the {name} total" for name in names)
    units = units_of(f"user: write the report code\nassistant: Here it is:\n```python\n{code}\n```\nDone.", COUNT)
    options = excerpt_options(units, weights("Which step computes the gamma total?"), COUNT)
    # "step", "computes" and "total" are on every line of the block; the line that also says "gamma" holds the most
    # and is the first excerpt, worth more than its size; the line after it (which may carry on what it says) next
    assert "total_gamma" in options[0].text and "total_alpha" not in options[0].text
    assert options[0].coverage > options[0].tokens / sum(u.tokens for u in units) and "total_delta" in options[1].text


def test_leading_options_open_the_page_one_unit_at_a_time_then_whole() -> None:
    reply = "\n".join(f"Step {n}: do the thing number {n} with care and patience, then check it." for n in range(12))
    units = units_of(f"user: how do I do it?\nassistant: {reply}", COUNT)
    options = leading_options(units, COUNT)
    assert options[0].text.startswith("user: how do I do it?") and options[0].text.endswith(ELLIPSIS)
    assert [o.chosen for o in options[:3]] == [(0,), (0, 1), (0, 1, 2)]
    assert [round(o.coverage, 6) for o in options] == sorted(round(o.coverage, 6) for o in options) and options[-1].coverage == 1.0
    assert options[-1].chosen == tuple(range(len(units)))
    assert leading_options(units_of("user: hi", COUNT), COUNT) == ()


def test_a_speakers_label_is_shown_once_per_run_and_again_where_the_excerpt_enters_it() -> None:
    content = "\n".join(["user: Emi: Hey Kate!", "Emi: I went skiing in Aspen last week", "Emi: the snow was perfect",
                         "user: Emi: we stayed in a cabin", "assistant: elise: wow", "elise: how cold was it?"])
    units = units_of(content, COUNT)
    # each side's messages open with its own name: the name says who speaks, the role prefix before it goes
    assert "\n".join(u.text for u in units) == ("Emi: Hey Kate!\nI went skiing in Aspen last week\nthe snow was perfect\n"
                                                "we stayed in a cabin\nelise: wow\nhow cold was it?")
    assert [u.speaker for u in units] == ["Emi:", "elise:"] and [u.side for u in units] == ["user:", "assistant:"]
    long = "\n".join([f"user: Emi: {' '.join(['filler'] * 100)}", f"Emi: {' '.join(['more'] * 100)}", "Emi: Aspen was great",
                      f"user: Emi: {' '.join(['cabin'] * 170)}"])
    units = units_of(long, COUNT)
    aspen = next(i for i, u in enumerate(units) if "Aspen" in u.text)
    assert render_excerpt(units, [aspen]) == f"Emi: {ELLIPSIS} Aspen was great\n{ELLIPSIS}"
    cabin = next(i for i, u in enumerate(units) if "cabin" in u.text)
    assert units[cabin].first and not units[cabin].text.startswith("Emi:")  # the run's second message, its label left out
    assert render_excerpt(units, [cabin]).startswith(f"{ELLIPSIS}\nEmi: cabin cabin")
    # the speaker's role still decides whose words hold a question about the user
    held = excerpt_options(units_of(content, COUNT), weights("Aspen skiing"), COUNT, source="user")
    assert held and "Aspen" in held[0].text


def test_the_role_prefix_stays_where_names_do_not_stand_for_the_two_sides() -> None:
    for content in (
        "user: Emi: Hey Kate!\nassistant: Sure, hello",  # the assistant's reply names no one
        "user: Emi: hi\nassistant: Emi: hi yourself",  # one name on both sides says nothing of who is who
        "user: Emi: hi\nuser: Kate: hello\nassistant: elise: hey all",  # two people on the user's side
        "user: [29/12/2023, 22:42] Emi: hi\nassistant: [29/12/2023, 22:43] elise: hey",  # a timestamp opens the rows
        "user: Emi: run it\nassistant → tool call shell({})\ntool shell result: Done: ok",  # a tool's rows
    ):
        rows = [u.text for u in units_of(content, COUNT)]
        assert rows[0].startswith("user: "), content


def test_a_chat_whose_sides_are_named_shows_each_message_by_its_speakers_name_and_matches_it_as_stored() -> None:
    content = ("user: Hey Gina! I lost my job as a banker yesterday.\nassistant: Sorry Jon, that is hard.\n"
               "user: Note: the studio opens in June.")
    names = {"user": "Jon", "assistant": "Gina"}
    shown = units_of(content, COUNT, names)
    plain = units_of(content, COUNT)
    assert [u.text for u in shown] == ["Jon: Hey Gina! I lost my job as a banker yesterday.", "Gina: Sorry Jon, that is hard.",
                                       "user: Note: the studio opens in June."]  # a row with a label of its own keeps it
    assert [u.speaker for u in shown] == ["Jon:", "Gina:", "user: Note:"] and [u.side for u in shown] == [u.side for u in plain]
    assert [u.terms for u in shown] == [u.terms for u in plain]  # who speaks is not what is said
    assert [u.tokens for u in shown] == [COUNT(u.text) for u in shown]
    # a unit cut from the middle of a long message repeats the speaker by name
    long = "assistant: " + " ".join(f"Sentence {n} about the dance studio and its floors." for n in range(40))
    middle = [u for u in units_of(long, COUNT, names) if not u.first]
    assert middle and {u.speaker for u in middle} == {"Gina:"}
    assert render_excerpt(units_of(long, COUNT, names), [4]) == "Gina: … Sentence 4 about the dance studio and its floors. …"


@pytest.mark.parametrize("rows, said", [(1, 20), (3, 20), (12, 3)])
def test_each_text_of_a_long_reply_is_counted_once_and_every_unit_holds_its_own_count(rows: int, said: int) -> None:
    """A long reply's units are its lines or sentences: each counted once (the tokenizer is most of what a page costs
    the first time a query reads it), each unit's tokens its own text's."""
    counter = TokenCounter()
    lines = [" ".join(f"Sentence {n} says lamp {r} in room {n} was moved on day {n}." for n in range(said)) for r in range(rows)]
    content = "user: Where is the lamp?\nassistant: " + "\n".join(lines)
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return counter.count(text)

    units = units_of(content, count)
    assert len(units) > rows and all(unit.tokens == counter.count(unit.text) for unit in units)
    assert len(counted) == len(set(counted))


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_the_nested_excerpts_of_a_long_reply_count_what_they_show_and_each_row_once(encoding: str) -> None:
    """The smallest options are counted exactly: each option's tokens are its text's, counted in its units' parts
    (`count_joined`), so that a part of one option said again in the next is not counted again by a count that keeps
    what it counted."""
    counter = TokenCounter(encoding)
    lines = [f"- Step {n}: move the lamp {n} metres / then {'check the lamp' if n % 3 == 0 else 'rest'}.\n  Notes: day {n}."
             for n in range(14)]
    content = "user: Where did the lamp go, and when?\nassistant: Here is the plan.\n" + "\n".join(lines) + "\nuser: thanks!"
    units = units_of(content, counter.count)
    kept: dict[str, int] = {}
    counted: list[str] = []

    def count(text: str) -> int:
        if text not in kept:
            counted.append(text)
            kept[text] = counter.count(text)
        return kept[text]

    options = excerpt_options(units, weights("lamp check when"), count)
    exact = options[:8]
    assert len(exact) >= 5
    assert [o.tokens for o in exact] == [counter.count(o.text) for o in exact]
    assert sum(len(text) for text in counted) < sum(len(o.text) for o in exact) / 2  # each option is not counted anew


_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["user: ", "assistant: ", ""]),  # "": a row that goes on the message before
        st.sampled_from(["", "Emi: ", "Kate: ", "Note: ", "Week 6: "]),
        st.text(alphabet="abc .!?\u00e9", min_size=0, max_size=40),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(rows=_ROWS, named=st.booleans())
def test_a_page_shown_whole_reads_as_its_excerpts_do(rows: list[tuple[str, str, str]], named: bool) -> None:
    # a Detail node (and a Consult's result) of a chat whose sides are named, by the names they call each other or
    # by labels of their own, shows the content as every unit of the page shown in order would; any other as stored
    content = "\n".join(role + label + text for role, label, text in [("user: ", *rows[0][1:]), *rows[1:]])
    names = {"user": "Jon", "assistant": "Gina"} if named else {}
    units = units_of(content, COUNT, names)
    if named or names_sides(content):
        assert shown_content(content, names) == render_excerpt(units, range(len(units)))
    else:
        assert shown_content(content, names) == content


def test_a_page_shown_whole_by_its_sides_names_or_its_own_labels() -> None:
    chat = "user: Hey Gina! I went to Rome.\nIt was great.\nassistant: Thanks, Jon!"
    assert shown_content(chat, {"user": "Jon", "assistant": "Gina"}) == "Jon: Hey Gina! I went to Rome.\nIt was great.\nGina: Thanks, Jon!"
    assert shown_content(chat) == chat  # nobody named: as stored
    labelled = "user: Emi: hi\nuser: Emi: there\nassistant: Kate: yo"
    assert shown_content(labelled) == "Emi: hi\nthere\nKate: yo"
