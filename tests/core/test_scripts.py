"""Terms of text written without spaces (gateway.core.scripts, gateway.core.lexical), with a segmenter installed and
without one, and Chinese in the per-language tables (gateway.core.languages)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from gateway.core.lexical import drop_common_words, drop_terms, drop_time_phrases, is_low_information, restem, table_terms, term_counts, terms, words
from gateway.core.scripts import cut_run, install_segmenter, installed_segmenter, letters

# a dictionary segmenter in miniature: the longest known word first, else one character
DICTIONARY = {"喜欢", "自行车", "密码锁", "密码", "忘记", "总是", "多少", "咪咪", "医院", "牙医", "小明", "昨天", "吉他"}


def segment(run: str) -> Sequence[tuple[str, Sequence[str]]]:
    out, at = [], 0
    while at < len(run):
        size = next((n for n in (3, 2) if run[at : at + n] in DICTIONARY), 1)
        word = run[at : at + size]
        out.append((word, [w for w in (word[:2],) if len(word) > 2 and w in DICTIONARY] + [word]))  # 密码锁 is 密码 too
        at += size
    return out


@pytest.fixture
def segmenter() -> Iterator[None]:
    previous = install_segmenter(segment)
    try:
        yield
    finally:
        install_segmenter(previous)


@pytest.fixture
def no_segmenter() -> Iterator[None]:
    previous = install_segmenter(None)
    try:
        yield
    finally:
        install_segmenter(previous)


def test_a_chinese_clause_is_cut_into_words_that_a_question_shares(segmenter: None) -> None:
    page = terms("我的自行车密码锁的密码是4821，我总是忘记。")
    question = terms("我的自行车锁密码是多少？")
    # stopwords (我, 的, 是) left out; digits as digits; a long word's shorter words counted with it
    assert page == ["自行车", "密码", "密码锁", "密码", "4821", "总是", "忘记"]
    assert set(page) & set(question) == {"自行车", "密码"}
    assert installed_segmenter() is segment


def test_without_a_segmenter_chinese_is_cut_into_bigrams(no_segmenter: None) -> None:
    assert terms("自行车密码") == ["自行", "行车", "车密", "密码"]
    assert set(terms("我的自行车密码锁")) & set(terms("自行车锁的密码是多少")) >= {"自行", "行车", "密码"}
    assert terms("猫") == ["猫"] and terms("我的") == []  # one character is itself; a bigram of two stopwords is none


def test_japanese_korean_and_thai_are_cut_into_bigrams_whatever_the_segmenter(segmenter: None) -> None:
    # kana anywhere: Japanese, and its kanji are cut as bigrams too, so a question and a page cut theirs alike
    assert set(terms("明日東京で会議があります")) & set(terms("東京の会議はいつ？")) == {"東京", "会議"}
    assert "서울" in terms("서울에 갔어요") and terms("서울") == ["서울"]
    assert letters("สวัสดี") == ["ส", "วั", "ส", "ดี"]  # a vowel or tone mark stays on its letter
    assert terms("สวัสดีครับ")[:2] == ["สวั", "วัส"]
    assert cut_run("東京", japanese=True) == [("東京", ["東京"])]


def test_latin_words_keep_their_terms_next_to_other_scripts(segmenter: None) -> None:
    assert terms("我喜欢Python和painting") == ["喜欢", "python", "paint"]
    assert words("नमस्ते दुनिया") == ["नमस्ते", "दुनिया"]  # a word keeps the marks written on it
    assert terms("I love it ❤️ so much") == terms("I love it so much")


def test_older_counts_of_a_whole_clause_are_cut_when_read(segmenter: None) -> None:
    stored = {"我的自行车密码锁的密码是4821": 1, "我总是忘记": 1, "paint": 2}  # lexicon 3: a clause was one word
    assert restem(stored, 3) == {"自行车": 1, "密码锁": 1, "密码": 2, "4821": 1, "总是": 1, "忘记": 1, "paint": 2}
    assert restem(stored, 3) == {**term_counts("我的自行车密码锁的密码是4821，我总是忘记。"), "paint": 2}


def test_common_words_leave_a_chinese_query(segmenter: None) -> None:
    docs = [{"小明": 1, "医院": 1}, {"小明": 2}, {"小明": 1, "牙医": 1}, {"吉他": 1}]
    assert drop_common_words("小明昨天去医院看牙医了吗？", docs, 0.5) == "昨天去医院看牙医了吗？"
    assert drop_common_words("小明？", docs, 0.5) == "小明？"  # nothing would be left to match on
    assert drop_terms("自行车密码", {"密码"}.__contains__) == "自行车"


def test_common_bigrams_leave_only_a_run_that_is_all_common(no_segmenter: None) -> None:
    assert drop_terms("東京に行く 東京", {"東京"}.__contains__) == "東京に行く"
    assert drop_terms("東京", {"東京"}.__contains__) == ""


@pytest.mark.parametrize(
    ("text", "low"),
    [("继续", True), ("然后呢？", True), ("好的，谢谢！", True), ("还是不行", True), ("嗯嗯", True), ("为什么？", True),
     ("ok 好的", True), ("我的自行车锁密码是多少？", False), ("咪咪几岁了？", False), ("继续讲杭州的行程", False)],
)
def test_chinese_replies_with_no_content_of_their_own(text: str, low: bool) -> None:
    # found in the tables alone: the same with a segmenter or without
    previous = install_segmenter(None)
    try:
        assert is_low_information(text) is low
        install_segmenter(segment)
        assert is_low_information(text) is low
    finally:
        install_segmenter(previous)


@pytest.mark.parametrize(
    ("query", "matched"),
    [("我昨天吃了什么？", "我吃了什么？"), ("上周五我见了谁？", "我见了谁？"), ("三天前我买了什么", "我买了什么"),
     ("去年我去了哪里旅行？", "我去了哪里旅行？"), ("3月5日那天我做了什么？", "那天我做了什么？"), ("昨天？", "昨天？"),
     ("我的自行车锁密码是多少？", "我的自行车锁密码是多少？")],
)
def test_drop_chinese_time_phrases(query: str, matched: str) -> None:
    assert drop_time_phrases(query) == matched


def test_table_words_are_terms_as_they_are() -> None:
    assert table_terms(["yesterday", "weeks", "昨天", "上周五"]) == ("yesterday", "week", "昨天", "上周五")


def test_mixed_runs_and_words_are_dropped_and_judged_piece_by_piece(segmenter: None) -> None:
    assert drop_terms("我喜欢Python和painting", {"python"}.__contains__) == "我喜欢和painting"
    assert drop_terms("서울자행차", {"자행"}.__contains__) == "서울자행차"  # a bigram run goes only when all of it is dropped
    assert [piece for piece, _ in cut_run("서울自行车", japanese=False)] == ["서울", "自行车"]
    assert is_low_information("好的 python") is False and is_low_information("好的 thanks") is True
