"""A first run without an API key or a running local model: the gateway says what to do, in one line, at start and
first in the error a request gets (set the key, or start the local model: scripts/quickstart)."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from gateway.adapters.upstream import Advice, advised, error_advice, start_advice
from gateway.config import parse_config
from gateway.errors import UpstreamAuthError, UpstreamBadRequest, UpstreamServerError, UpstreamUnavailable
from tests.support.gateway_process import GatewayProcess, free_port, gateway_config

HOSTED = {"model_name": "gpt-4o-mini", "litellm_params": {"model": "openai/gpt-4o-mini", "api_key": "os.environ/PCP_TEST_UNSET_KEY"}}
LOCAL = {"model_name": "qwen-local", "litellm_params": {"model": "openai/qwen", "api_base": "http://127.0.0.1:8080/v1", "api_key": "none"}}


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    assert isinstance(body, dict)
    return str(body["message"])


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_at_start_a_model_without_its_key_says_set_it_or_run_the_local_model(no_key: None) -> None:
    config = parse_config({"model_list": [HOSTED, LOCAL]}, environ={})
    (line,) = start_advice(config, answers=lambda base: False)
    assert line.startswith("gpt-4o-mini cannot answer: OPENAI_API_KEY is not set. Set it and restart the gateway, or run")
    assert "scripts/quickstart" in line and "\n" not in line
    (line,) = start_advice(config, answers=lambda base: True)
    assert line.endswith("or ask for qwen-local (a local model, running)")


def test_at_start_a_local_model_that_does_not_answer_is_named_when_the_keys_are_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    config = parse_config({"model_list": [HOSTED, LOCAL]}, environ={})
    assert start_advice(config, answers=lambda base: False) == [
        "qwen-local: nothing answers at http://127.0.0.1:8080/v1 yet; start it (scripts/local-model start) before asking it"]
    assert start_advice(config, answers=lambda base: True) == []


def test_the_advice_leads_the_errors_it_is_about_and_no_other(no_key: None) -> None:
    advice = error_advice(parse_config({"model_list": [HOSTED, LOCAL]}, environ={}))
    hosted, local = advice["gpt-4o-mini"], advice["qwen-local"]
    unreachable = UpstreamServerError("upstream failed: Cannot connect to host api.openai.com:443")
    assert advised(unreachable, hosted).message == f"{hosted.text} (upstream failed: Cannot connect to host api.openai.com:443)"
    assert type(advised(unreachable, hosted)) is UpstreamServerError and advised(unreachable, hosted).status == 502
    assert advised(UpstreamAuthError("upstream rejected the credentials"), hosted).message.startswith(hosted.text)
    rejected = UpstreamBadRequest("upstream rejected the request: temperature")
    assert advised(rejected, hosted) is rejected
    answered = UpstreamServerError("upstream failed: 500 Failed to parse tool call")  # the local server answered
    assert advised(answered, local) is answered
    refused = UpstreamUnavailable("upstream failed: Cannot connect to host 127.0.0.1:8080")
    assert advised(refused, local).message.startswith("nothing answers at http://127.0.0.1:8080/v1 for qwen-local: start it")
    assert advised(refused, None) is refused and advised(refused, Advice("x")).message == "x (upstream failed: Cannot connect to host 127.0.0.1:8080)"


def test_serve_without_a_key_or_a_local_model_says_what_to_do_at_start_and_in_the_502(tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    config = gateway_config(closed, tmp_path / "data", pcp={"embeddings": False})
    config["model_list"] = [HOSTED, {**LOCAL, "litellm_params": {**LOCAL["litellm_params"], "api_base": closed}}]
    # OPENAI_API_BASE sends the keyless model's calls to a closed port on loopback instead of api.openai.com
    env: dict[str, str | None] = {"OPENAI_API_KEY": None, "OPENAI_API_BASE": closed, "PCP_TEST_UNSET_KEY": None}
    with GatewayProcess(config=config, workdir=tmp_path, env=env) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="anything", max_retries=0)
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hello!"}])
        assert raised.value.status_code == 502
        assert _message(raised.value).startswith("gpt-4o-mini cannot answer: OPENAI_API_KEY is not set. Set it and restart")
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="qwen-local", messages=[{"role": "user", "content": "Hello!"}])
        assert raised.value.status_code == 502
        assert _message(raised.value).startswith(f"nothing answers at {closed} for qwen-local: start it")
        log = gateway.log()
    assert "gpt-4o-mini cannot answer: OPENAI_API_KEY is not set. Set it and restart the gateway, or run scripts/quickstart" in log
