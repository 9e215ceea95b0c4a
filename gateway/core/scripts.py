"""Writing systems, as lexical matching cuts them into words.

Most scripts put spaces between words (Latin, Cyrillic, Greek, Arabic, Devanagari…): a word is a run of letters and
digits, with the combining marks written on them (a Devanagari vowel sign, a Thai tone mark). Chinese, Japanese,
Korean (whose spaces part phrases, a word and its particles written together), Thai, Lao, Khmer and Myanmar are
:data:`UNSEGMENTED`: a run of their characters is cut into words

* by the :class:`Segmenter` installed for Chinese (:func:`install_segmenter`: a dictionary segmenter,
  gateway.adapters.segmenter, chosen by the composition root), for a run of Han characters in a text with no
  Japanese kana;
* else into overlapping character bigrams ("东京都" -> "东京", "京都"; a run of one character is itself): two
  texts that share a word of two characters or more share its bigrams, whatever the language, with no dictionary.
  Japanese text (kana anywhere in it) is cut so whole, its kanji with it, so that a question and a page cut theirs
  alike.

The segmenter is the one piece of state here: installed once per process, before any text is matched, by the
composition root (gateway.bootstrap), and the same for every text after. Without one (a process that matches no
Chinese, the core's own tests) Chinese is cut into bigrams.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

__all__ = ["CJK_PUNCTUATION", "HAN", "KANA", "MARKS", "UNSEGMENTED", "Segmenter", "cut_run", "install_segmenter", "installed_segmenter", "is_japanese", "letters"]

CJK_PUNCTUATION = "\u3000-\u303f\uff00-\uff0f\uff1a-\uff20"  # 、。「」，：？！…
# Han (and its extensions), kana, Hangul, Thai, Lao, Myanmar, Khmer
HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
UNSEGMENTED = HAN + KANA + "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"


def _mark_ranges() -> str:
    """The combining marks of the Basic Multilingual Plane (a vowel sign, a virama, an accent written apart), as the
    ranges of a character class."""
    ranges: list[list[int]] = []
    for code in range(0x300, 0x10000):
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in ranges)


MARKS = _mark_ranges()

_HAN_RUN = re.compile(f"[{HAN}]+")
_KANA_CHAR = re.compile(f"[{KANA}]")
_LETTER = re.compile(f".[{MARKS}]*", re.DOTALL)

# A run of Han characters -> its words in order, their concatenation the run, each with its terms (the word, and the
# shorter words of the dictionary within it: 自行车 is also 自行 and 行车, so that it meets 行车 said alone).
Segmenter = Callable[[str], Sequence[tuple[str, Sequence[str]]]]
_segmenters: list[Segmenter] = []  # at most one: the installed segmenter


def install_segmenter(segmenter: Segmenter | None) -> Segmenter | None:
    """Install ``segmenter`` for Chinese (``None``: none, bigrams); returns the one it replaces. Called once per
    process by the composition root, before any text is matched: terms stored by a process and terms matched by
    another must be cut alike."""
    previous = _segmenters[0] if _segmenters else None
    _segmenters.clear()
    if segmenter is not None:
        _segmenters.append(segmenter)
    return previous


def installed_segmenter() -> Segmenter | None:
    return _segmenters[0] if _segmenters else None


def is_japanese(text: str) -> bool:
    """Whether ``text`` holds Japanese kana (its Han characters are then cut as Japanese, into bigrams)."""
    return _KANA_CHAR.search(text) is not None


def letters(run: str) -> list[str]:
    """``run``'s characters, each with the combining marks that follow it."""
    return _LETTER.findall(run)


def _bigrams(run: str) -> list[str]:
    found = letters(run)
    return found if len(found) < 2 else [a + b for a, b in zip(found, found[1:])]


def cut_run(run: str, japanese: bool) -> list[tuple[str, list[str]]]:
    """A run of :data:`UNSEGMENTED` characters as pieces (their concatenation the run), each with its words: a Han
    piece cut by the installed segmenter (outside Japanese text), one word per piece; any other piece, or every
    piece without a segmenter, its bigrams."""
    segment = _segmenters[0] if _segmenters and not japanese else None
    if segment is None:
        return [(run, _bigrams(run))]
    pieces: list[tuple[str, list[str]]] = []
    at = 0
    for match in _HAN_RUN.finditer(run):
        if match.start() > at:
            rest = run[at : match.start()]
            pieces.append((rest, _bigrams(rest)))
        pieces.extend((word, list(words)) for word, words in segment(match.group(0)) if word)
        at = match.end()
    if at < len(run):
        pieces.append((run[at:], _bigrams(run[at:])))
    return pieces
