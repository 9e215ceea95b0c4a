"""Drive aider through several turns with its Python API (run by the aider venv's python, not the gateway's).

Input, a JSON object on stdin: base_url, repo, thread (``null``: aider's own requests, without a thread header),
files (added to the chat), turns (messages to send, in order), settle (optional: after each turn, file the turn's
exchanges into aider's history as it does after an applied edit, which is when it summarizes its history; aider
0.86 does so in a background thread that races with the edit's own "I updated the files." note, so the driver
does it without an edit). Aider sends its own requests exactly as its CLI would (diff edit format, streamed, the repository map
on); the only settings changed are the ones that would make it prompt or reach the network. Output, on stdout:
one JSON line with aider's reply to each turn and the files' contents after each turn.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    spec = json.load(sys.stdin)
    os.environ["OPENAI_API_BASE"] = spec["base_url"]
    os.environ["OPENAI_API_KEY"] = "sk-client"
    os.chdir(spec["repo"])
    from aider.coders import Coder
    from aider.io import InputOutput
    from aider.models import Model

    io = InputOutput(yes=True, pretty=False, fancy_input=False, input_history_file=os.devnull, chat_history_file=os.devnull)
    model = Model("openai/" + spec["model"])
    if spec["thread"]:  # else the gateway finds the session's thread by what its requests carry
        model.extra_params = {"extra_headers": {"X-PCP-Thread": spec["thread"]}}
    coder = Coder.create(
        main_model=model, io=io, fnames=spec["files"], edit_format="diff", map_tokens=spec.get("map_tokens", 256),
        stream=True, auto_commits=False, auto_lint=False, suggest_shell_commands=False, detect_urls=False,
    )
    replies, snapshots = [], []
    for turn in spec["turns"]:
        replies.append(coder.run(with_message=turn))
        if spec.get("settle"):
            coder.move_back_cur_messages(None)
        snapshots.append({name: open(name, encoding="utf-8").read() for name in spec["files"]})
    print(json.dumps({"replies": replies, "files": snapshots}))


if __name__ == "__main__":
    main()
