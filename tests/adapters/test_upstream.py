"""Which path litellm takes to openai-compatible providers (`select_openai_path`): plain calls on a mapping."""

from __future__ import annotations

from pathlib import Path

from gateway.adapters.upstream import HTTP_HANDLER_SWITCH, select_openai_path
from gateway.config import GatewayConfig


def _config(**litellm_params: str) -> GatewayConfig:
    params = {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "api_key": "k", **litellm_params}
    return GatewayConfig.model_validate({"model_list": [{"model_name": "m", "litellm_params": params}], "store": {"data_dir": str(Path("unused"))}})


def test_litellm_handler_is_selected_by_default() -> None:
    environ: dict[str, str] = {}
    assert select_openai_path(_config(), environ) is True
    assert environ == {HTTP_HANDLER_SWITCH: "true"}


def test_an_operator_choice_is_kept() -> None:
    environ = {HTTP_HANDLER_SWITCH: "false"}
    assert select_openai_path(_config(), environ) is False
    assert environ == {HTTP_HANDLER_SWITCH: "false"}
    assert select_openai_path(_config(), {HTTP_HANDLER_SWITCH: "True"}) is True


def test_an_organization_keeps_the_sdk_which_alone_sends_it() -> None:
    for name in ("OPENAI_ORGANIZATION", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        environ = {name: "org-1"}
        assert select_openai_path(_config(), environ) is False
        assert HTTP_HANDLER_SWITCH not in environ
    environ = {}
    assert select_openai_path(_config(organization="org-1"), environ) is False
    assert environ == {}
