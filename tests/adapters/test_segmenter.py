"""The Chinese segmenter (gateway.adapters.segmenter): jieba's words, loaded only when Chinese is first seen, and the
Chinese tables' words each one of its words (so that a table word is a term)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.adapters.segmenter import JiebaSegmenter
from gateway.core.languages import CHINESE
from gateway.core.lexical import terms
from gateway.core.scripts import install_segmenter

SEGMENTER = JiebaSegmenter()


def test_a_run_is_cut_into_words_that_make_it_up_each_with_its_shorter_words() -> None:
    run = "我的自行车密码锁的密码是多少小明昨天去医院看牙医了"
    cut = list(SEGMENTER(run))
    assert "".join(word for word, _ in cut) == run and {"自行车", "密码锁", "医院", "牙医"} <= {word for word, _ in cut}
    assert dict(cut)["自行车"] == ("自行", "行车", "自行车") and dict(cut)["密码锁"] == ("密码", "密码锁")


@pytest.mark.parametrize("table", ["telling", "placing", "durations"])
def test_the_chinese_tables_words_are_each_one_word(table: str) -> None:
    assert [w for w in getattr(CHINESE, table) if [word for word, _ in SEGMENTER(w)] != [w]] == []


def test_with_the_segmenter_a_question_shares_its_evidences_words() -> None:
    previous = install_segmenter(SEGMENTER)
    try:
        shared = set(terms("我的自行车密码锁的密码是4821，我总是忘记。")) & set(terms("我的自行车锁密码是多少？"))
    finally:
        install_segmenter(previous)
    assert shared == {"自行车", "自行", "行车", "密码"}  # 自行车 counts its shorter words too


def test_the_dictionary_is_loaded_only_when_chinese_is_first_seen() -> None:
    script = (
        "import sys\n"
        "from gateway.adapters.segmenter import JiebaSegmenter\n"
        "from gateway.core.lexical import terms\n"
        "from gateway.core.scripts import install_segmenter\n"
        "segmenter = JiebaSegmenter()\n"
        "install_segmenter(segmenter)\n"
        "terms('An English-only user pays nothing: no dictionary, no memory. Ünïcode, 東京に行く, 서울에 갔어요')\n"
        "print('rjieba' in sys.modules, segmenter.loaded)\n"
        "terms('我的自行车')\n"
        "print('rjieba' in sys.modules, segmenter.loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split("\n")[:2] == ["False False", "True True"]
