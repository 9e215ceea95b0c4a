"""Lexical evidence: word extraction, term counts, BM25 and the low-information test."""

from __future__ import annotations

import pytest

from gateway.core.lexical import bm25, drop_common_words, drop_time_phrases, is_low_information, restem, term_counts, terms, words


def test_words_drop_stopwords_and_single_letters() -> None:
    assert words("The user said: I'm adopting a DOG, it's Rex!") == ["said", "adopting", "dog", "rex"]
    assert term_counts("dog dog cat") == {"dog": 2, "cat": 1}


def test_terms_are_stems_so_word_forms_meet() -> None:
    assert terms("She painted; painting paints her days.") == ["paint", "paint", "paint", "day"]
    assert term_counts("adopted adoption adopting") == {"adopt": 3}
    # counts stored before stemming (lexicon 1) become the same counts of terms
    assert restem({"painting": 2, "painted": 1, "dog": 1}) == {"paint": 3, "dog": 1} == term_counts("painting painting painted dog")


def test_bm25_prefers_rare_matching_terms_and_shorter_documents() -> None:
    docs = [{"dog": 1, "walk": 1}, {"dog": 1}, {"cat": 3}, {"dog": 1, "walk": 1, **{f"x{i}": 1 for i in range(30)}}]
    scores = bm25(["dog", "walk"], docs, [sum(d.values()) for d in docs])
    assert scores[0] > scores[1] > scores[3] > scores[2] == 0.0  # a long document pays for its length
    assert bm25([], docs, [1, 1, 1, 1]) == [0.0] * 4
    assert bm25(["dog"], [], []) == []


def test_bm25_windows_score_a_page_with_its_neighbours_words() -> None:
    # pages in conversation order; "b" and "d" match "dog" alike, but only "b" sits next to the "walk"
    docs = [{"walk": 1}, {"dog": 1}, {"cat": 1}, {"dog": 1}, {"cat": 1}]
    lengths = [1] * 5
    plain = bm25(["dog", "walk"], docs, lengths)
    assert plain[1] == plain[3] and plain[0] > 0 and plain[2] == 0.0
    windowed = bm25(["dog", "walk"], docs, lengths, neighbours=0.5)
    assert windowed[1] > windowed[3] > 0 and windowed[2] > 0  # "c" borrows half of each neighbour's "dog"
    assert bm25(["dog", "walk"], docs, lengths, neighbours=0.0) == plain


def test_words_most_documents_contain_are_dropped_from_a_query() -> None:
    docs = [{"carolin": 1, "paint": 1}, {"carolin": 2}, {"carolin": 1, "dog": 1}, {"hike": 1}]
    assert drop_common_words("What did Caroline's dog paint?", docs, 0.5) == "What did dog paint?"
    assert drop_common_words("What did Caroline paint?", docs, 0.75) == "What did Caroline paint?"  # 3 of 4 is not more
    assert drop_common_words("Caroline?", docs, 0.5) == "Caroline?"  # nothing would be left to match on
    assert drop_common_words("Caroline paints", [], 0.5) == "Caroline paints"


@pytest.mark.parametrize(
    ("text", "low"),
    [("continue", True), ("and then?", True), ("it still fails", True), ("ok", True), ("", True),
     ("thanks", True), ("yes please", True), ("why?", True), ("Great, got it, thanks!", True), ("sounds good", True),
     ("why does the sourdough starter smell of acetone?", False), ("Paris?", False), ("fix the parser", False),
     ("What tire pressure?", False), ("is it good for the battery?", False)],
)
def test_low_information_queries(text: str, low: bool) -> None:
    assert is_low_information(text) is low


def test_irregular_forms_meet_their_base_word() -> None:
    assert terms("How much did I spend? What did she buy? Where did they go?") == terms("much I spent; she bought; they went")
    assert terms("a bit of ground") == ["bit", "ground"]  # forms that are mostly other words stay apart
    assert restem({"bought": 2, "paint": 1}, 2) == {"buy": 2, "paint": 1}  # stored stems meet the new terms


@pytest.mark.parametrize(
    ("query", "matched"),
    [
        ("What kitchen appliance did I buy 10 days ago?", "What kitchen appliance did I buy?"),
        ("Who did I go with to the concert last Saturday?", "Who did I go with to the concert?"),
        ("What gardening activity did I do two weeks ago?", "What gardening activity did I do?"),
        ("Which store did I spend the most at in the past month?", "Which store did I spend the most at?"),
        ("How many hours did I jog last week, and this month?", "How many hours did I jog, and?"),
        ("How many days ago did I meet Emma?", "How did I meet Emma?"),
        ("What did I cook the day before yesterday?", "What did I cook?"),
        # nothing that places the question in time: unchanged, as is a question that would be left with nothing
        ("What was my last job?", "What was my last job?"),
        ("When did Caroline go to the support group?", "When did Caroline go to the support group?"),
        ("yesterday?", "yesterday?"),
    ],
)
def test_drop_time_phrases_leaves_what_the_question_is_about(query: str, matched: str) -> None:
    assert drop_time_phrases(query) == matched
