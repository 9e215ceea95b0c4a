"""Which path litellm takes to openai-compatible providers (`select_openai_path`): plain calls on a mapping; the prices
the Router is given; and which upstream failures are the server's own (`translate_error`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from litellm import exceptions as llm_errors

from gateway.adapters.upstream import HTTP_HANDLER_SWITCH, build_router, check_router, select_openai_path, translate_error
from gateway.config import GatewayConfig
from gateway.errors import UpstreamServerError, UpstreamUnavailable


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


# litellm's Router builds a pydantic adapter of its own types that warns about them (not ours)
@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
def test_a_deployment_litellm_has_no_price_for_is_priced_at_zero_and_a_known_or_configured_price_is_kept() -> None:
    def deployment(name: str, model: str, **info: object) -> dict[str, object]:
        return {"model_name": name, "litellm_params": {"model": model, "api_base": "http://127.0.0.1:9/v1", "api_key": "k"}, "model_info": info}

    config = GatewayConfig.model_validate({"model_list": [
        deployment("local", "openai/my-local-model"),
        deployment("mapped", "openai/gpt-4o-mini"),
        deployment("priced", "openai/my-local-model", input_cost_per_token=1e-6),
        deployment("as", "openai/my-local-model", base_model="gpt-4o-mini"),
        deployment("off", "openai/my-local-model", pcp_enabled=False),
    ], "store": {"data_dir": str(Path("unused"))}})  # fmt: skip
    router = build_router(config)
    router.discard()  # type: ignore[no-untyped-call]
    infos = {d["model_name"]: d["model_info"] for d in router.model_list}
    assert (infos["local"]["input_cost_per_token"], infos["local"]["output_cost_per_token"]) == (0.0, 0.0)
    assert infos["off"]["pcp_enabled"] is False and infos["off"]["input_cost_per_token"] == 0.0
    assert "input_cost_per_token" not in infos["mapped"]  # litellm's cost map prices it
    assert infos["priced"]["input_cost_per_token"] == 1e-6 and "output_cost_per_token" not in infos["priced"]
    assert "input_cost_per_token" not in infos["as"]


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
def test_a_model_an_earlier_router_named_is_still_unpriced() -> None:
    # a Router adds its models' names to litellm's cost map, without a price: a second one (the gateway builds
    # one to check the settings at start-up, then its own) must not take them for priced
    config = GatewayConfig.model_validate({"model_list": [{"model_name": "local", "litellm_params": {
        "model": "openai/another-local-model", "api_base": "http://127.0.0.1:9/v1", "api_key": "k"}}],
        "store": {"data_dir": str(Path("unused"))}})  # fmt: skip
    first, second = build_router(config), build_router(config)
    for router in (first, second):
        router.discard()  # type: ignore[no-untyped-call]
        assert router.model_list[0]["model_info"]["input_cost_per_token"] == 0.0


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
def test_the_router_that_checks_the_settings_leaves_no_callback_behind() -> None:
    # a Router hooks its usage callbacks into litellm's global lists; the one built only to check the settings
    # (at start-up) would otherwise run them after every call of the gateway's own Router
    import litellm

    def hooked() -> list[int]:
        lists = (litellm._async_success_callback, litellm.success_callback, litellm._async_failure_callback, litellm.failure_callback)
        return [len(callbacks) for callbacks in lists]

    before = hooked()
    check_router(_config())
    assert hooked() == before
    router = build_router(_config())
    assert hooked() != before  # what would stay behind
    router.discard()  # type: ignore[no-untyped-call]


def test_a_server_error_is_told_apart_from_an_unreachable_upstream() -> None:
    """A 5xx the upstream answered may be its model's output it could not parse (a paged round is then asked again
    without the zoom tools); a connection that failed, which litellm also reports as 500, is not asked again."""
    answered = translate_error(llm_errors.InternalServerError(message="cannot parse", llm_provider="openai", model="m"))
    down = translate_error(llm_errors.ServiceUnavailableError(message="down", llm_provider="openai", model="m"))
    refused = translate_error(llm_errors.APIConnectionError(message="refused", llm_provider="openai", model="m"))
    assert isinstance(answered, UpstreamServerError) and isinstance(down, UpstreamServerError)
    assert isinstance(refused, UpstreamUnavailable) and not isinstance(refused, UpstreamServerError)
    assert answered.status == refused.status == 502 and answered.code == refused.code  # the same for the client
