"""Who the line labels of a thread's last exchanges name (gateway.service.ingest.speakers_of)."""

from __future__ import annotations

from gateway.core import split_blocks
from gateway.service.ingest import speakers_of


def test_the_labels_that_open_the_last_exchanges_messages_name_their_sides() -> None:
    log = "\n".join(f"INFO: worker {n} ok" for n in range(50))  # lines that look like a label, in a pasted log
    messages = [
        {"role": "user", "content": f"Emi: here is the log\n{log}"},
        {"role": "assistant", "content": "Elise: all fine"},
        {"role": "user", "content": f"Emi: and the next one\n{log}"},
        {"role": "assistant", "content": "Elise: fine too"},
        {"role": "user", "content": "What did Elise say?"},
    ]
    split = split_blocks(messages)
    # a label opens its message: what a message says below its first line is its content, however it looks
    assert speakers_of(split.blocks, split.tail) == {"emi": "user", "elise": "assistant"}


def test_a_chat_without_labels_names_no_one() -> None:
    split = split_blocks([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                          {"role": "user", "content": "What did Caroline paint?"}])
    assert speakers_of(split.blocks, split.tail) == {}


def test_a_chat_whose_lines_carry_labels_learns_no_names_from_its_calls() -> None:
    from gateway.service.ingest import called_in

    plain = split_blocks([{"role": "user", "content": "Hey Gina! I got the job."}, {"role": "assistant", "content": "Congrats Jon!"},
                          {"role": "user", "content": "next"}])
    assert called_in(plain.blocks[0]) == (("assistant", "Jon"), ("user", "Gina"))
    # REALTALK's Emi and elise call each other Emily and Kate: their labels say who speaks, by the chat's own names
    labelled = split_blocks([{"role": "user", "content": "Emi: Hey Emily! What have you been up to?"},
                             {"role": "assistant", "content": "elise: Hey Kate!"}, {"role": "user", "content": "next"}])
    assert called_in(labelled.blocks[0]) == ()
