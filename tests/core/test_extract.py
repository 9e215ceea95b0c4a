from __future__ import annotations

from typing import Any

from gateway.core.blocks import split_blocks
from gateway.core.extract import REPLY_CAP, extract_clusters, extractive_summary, lead_text


def test_lead_text_keeps_short_text_and_collapses_whitespace() -> None:
    assert lead_text("  one\n two   three ", 100) == "one two three"


def test_lead_text_cuts_at_sentence_boundaries() -> None:
    text = "First fact is here. Second fact follows! Third one is long enough to overflow."
    assert lead_text(text, 45) == "First fact is here. Second fact follows! …"
    assert lead_text("第一句话。第二句话。第三句话很长很长很长很长。", 10) == "第一句话。第二句话。 …"


def test_lead_text_cuts_a_single_long_sentence_at_a_word() -> None:
    text = "word " * 50
    cut = lead_text(text, 23)
    assert cut == "word word word word …"
    assert lead_text("x" * 50, 10) == "xxxxxxxxxx …"


def test_extractive_summary_keeps_the_facts() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Which port does the API use? Not 8080, that was wrong."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c", "function": {"name": "grep", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "PORT=9000"},
        {"role": "assistant", "content": "The API listens on port 9000. " + "More detail. " * 200},
    ]
    summary = extractive_summary(split_blocks(messages).blocks[0])
    user_line, tools_line, reply_line = summary.split("\n")
    assert user_line == "User: Which port does the API use? Not 8080, that was wrong."
    assert tools_line == "Tools used: grep"
    assert reply_line.startswith("Assistant: The API listens on port 9000.")
    assert reply_line.endswith("…") and len(reply_line) <= len("Assistant: ") + REPLY_CAP + 2


def test_extractive_summary_of_an_empty_exchange() -> None:
    block = split_blocks([{"role": "user", "content": ""}, {"role": "assistant", "content": " "}]).blocks[0]
    assert extractive_summary(block) == "(empty exchange)"


def test_clusters_rank_by_weighted_frequency() -> None:
    text = "docker compose docker redis the and redis docker kubernetes ab 123"
    assert extract_clusters(text) == ("docker", "redis", "compose", "kubernetes")
    assert extract_clusters(text, emphasis="kubernetes kubernetes", limit=2) == ("kubernetes", "docker")
    assert extract_clusters("x" * 41) == ()


def test_a_chat_whose_names_stand_for_its_sides_is_summarised_by_the_names() -> None:
    named = split_blocks([{"role": "user", "content": "Vanessa: my first competition is in September\nVanessa: so nervous"},
                          {"role": "assistant", "content": "Nebraas: You will do great"}]).blocks[0]
    assert extractive_summary(named) == "Vanessa: my first competition is in September\nVanessa: so nervous\nNebraas: You will do great"
    one_named = split_blocks([{"role": "user", "content": "Vanessa: hi"}, {"role": "assistant", "content": "Hello!"}]).blocks[0]
    assert extractive_summary(one_named) == "User: Vanessa: hi\nAssistant: Hello!"


def test_the_summary_of_a_chat_whose_sides_are_named_opens_its_lines_with_the_names() -> None:
    block = split_blocks([{"role": "user", "content": "Hey Gina! I lost my job."}, {"role": "assistant", "content": "Sorry Jon."}]).blocks[0]
    assert extractive_summary(block, {"user": "Jon", "assistant": "Gina"}) == "Jon: Hey Gina! I lost my job.\nGina: Sorry Jon."
    assert extractive_summary(block) == "User: Hey Gina! I lost my job.\nAssistant: Sorry Jon."


def test_a_labelled_chats_summary_keeps_its_own_labels_whatever_names_are_known() -> None:
    # (one label on both sides: not the names of the two sides, so the roles stay before them)
    block = split_blocks([{"role": "user", "content": "Emi: Hey Emily!"}, {"role": "assistant", "content": "Emi: sorry, my phone"}]).blocks[0]
    assert extractive_summary(block, {"user": "Kate", "assistant": "Emily"}) == "User: Emi: Hey Emily!\nAssistant: Emi: sorry, my phone"


def test_one_message_that_opens_like_a_label_keeps_the_names() -> None:
    block = split_blocks([{"role": "user", "content": "Week 6: I spent it on tomatoes."}, {"role": "assistant", "content": "Lovely."}]).blocks[0]
    assert extractive_summary(block, {"user": "Jon", "assistant": "Gina"}) == "Jon: Week 6: I spent it on tomatoes.\nGina: Lovely."
