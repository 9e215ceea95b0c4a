from __future__ import annotations

import json
from datetime import datetime, timezone

from gateway.adapters.manifests import NewPage, manifest_json, parse_manifest
from gateway.core import LineHolds, original_page
from gateway.core.blocks import split_blocks
from gateway.core.lexical import LEXICON, term_counts
from gateway.core.pages import Page
from gateway.core.worth import DAY_OVERHEAD

NOW = datetime(2026, 2, 14, 10, 30, tzinfo=timezone.utc)


def _page(reply: str) -> Page:
    messages = [{"role": "user", "content": "Where is the cat?"}, {"role": "assistant", "content": reply}, {"role": "user", "content": "ok"}]
    return original_page(split_blocks(messages).blocks[0], NOW, len)


def test_what_the_line_holds_is_derived_at_ingestion_and_stored_with_the_manifest() -> None:
    page = _page("On the mat.")
    new = NewPage.of(page, len, term_counts(page.content))
    assert new.line is LineHolds.CONTENT and new.background_tokens == len(f"[{page.id}] User: Where is the cat? Assistant: On the mat.")
    stored = parse_manifest(page.id, manifest_json(new))
    assert (stored.line, stored.background_tokens, stored.summary_tokens, stored.page.summary) == (
        LineHolds.CONTENT, new.background_tokens, new.summary_tokens, page.summary)


def test_a_manifest_stored_before_the_line_field_falls_back_to_its_summary() -> None:
    for reply, expected in (("On the mat.", LineHolds.SUMMARY), ("It sleeps. " * 80, LineHolds.LEAD)):
        page = _page(reply)
        data = json.loads(manifest_json(NewPage.of(page, len, term_counts(page.content))))
        del data["line"]
        assert parse_manifest(page.id, json.dumps(data)).line is expected


def test_term_counts_stored_before_stemming_are_stemmed_when_read() -> None:
    page = _page("I was painting the boats.")
    data = json.loads(manifest_json(NewPage.of(page, len, term_counts(page.content))))
    assert data["lexicon"] == LEXICON and data["terms"]["paint"] == 1
    del data["lexicon"]
    data.update(terms={"painting": 1, "boats": 1, "cat": 1}, length=3)
    stored = parse_manifest(page.id, json.dumps(data))
    assert (dict(stored.terms), stored.length) == ({"paint": 1, "boat": 1, "cat": 1}, 3)


def test_a_line_counted_with_its_date_is_counted_without_it_when_read() -> None:
    page = _page("On the mat.")
    new = NewPage.of(page, len, term_counts(page.content))
    data = json.loads(manifest_json(new))
    assert data["lines"] == 2
    del data["lines"]
    data["background_tokens"] = new.background_tokens + DAY_OVERHEAD  # as stored when the date was on the line
    assert parse_manifest(page.id, json.dumps(data)).background_tokens == new.background_tokens


def test_stems_stored_before_irregular_forms_meet_their_base_word_when_read() -> None:
    page = _page("I bought two boats.")
    data = json.loads(manifest_json(NewPage.of(page, len, term_counts(page.content))))
    assert data["terms"]["buy"] == 1
    data.update(lexicon=2, terms={"bought": 1, "boat": 1, "agre": 1}, length=3)  # lexicon 2 left "bought" as is
    stored = parse_manifest(page.id, json.dumps(data))
    assert (dict(stored.terms), stored.length) == ({"buy": 1, "boat": 1, "agre": 1}, 3)  # stems stay as stored


def test_the_users_own_words_are_read_from_the_stored_anchor() -> None:
    page = _page("The cat sleeps on the mat in the garden shed.")
    anchor = "Where is the cat?\nok"
    new = NewPage.of(page, len, term_counts(page.content), anchor=anchor)
    for manifest in (new.manifest(), parse_manifest(page.id, manifest_json(new))):
        assert manifest.own_terms == term_counts(anchor) and "garden" in manifest.terms
    # a manifest stored without its anchor, and a consolidated page, speak for the whole page
    data = json.loads(manifest_json(new))
    del data["anchor"]
    assert parse_manifest(page.id, json.dumps(data)).own_terms == parse_manifest(page.id, json.dumps(data)).terms
    data = json.loads(manifest_json(new))
    data.update(type="Consolidated", source_ids=["aaaaaaaaaa"], topic_id="t1")
    assert parse_manifest(page.id, json.dumps(data)).own_terms == new.terms


def test_how_a_pages_sides_call_each_other_is_stored_with_its_manifest_and_absent_before() -> None:
    page = _page("On the mat, Jon.")
    calls = (("assistant", "Jon"), ("user", "Gina"))
    new = NewPage.of(page, len, term_counts(page.content), called=calls)
    assert parse_manifest(page.id, manifest_json(new)).called == calls == new.manifest().called
    plain = json.loads(manifest_json(NewPage.of(page, len, term_counts(page.content))))
    assert "called" not in plain and parse_manifest(page.id, json.dumps(plain)).called == ()
