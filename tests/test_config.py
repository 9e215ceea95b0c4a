"""Loading config files: LiteLLM's format, our sections, and errors that name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[1]
MODEL = {"model_name": "m", "litellm_params": {"model": "openai/m"}}


def test_the_shipped_config_loads() -> None:
    config = load_config(ROOT / "config.yaml", environ={"OPENAI_API_KEY": "sk-x"})
    assert "gpt-4o-mini" in config.model_names
    assert config.model_list[0].litellm_params["api_key"] == "sk-x"
    assert config.server.port == 4000 and config.store.redis_url is None
    markers = config.pcp.client_markers()  # aider's markers are built in (tests/clients/test_aider.py)
    assert markers.pins and markers.preamble and markers.side_requests


def test_client_profiles_are_on_without_a_pcp_section_and_the_config_adds_to_them_or_turns_one_off() -> None:
    bare = parse_config({"model_list": [MODEL]}, environ={}).pcp.client_markers()
    summarize = [{"role": "system", "content": "*Briefly* summarize this partial conversation about programming.\n..."}, {"role": "user", "content": "# USER\nhi"}]
    assert bare.side_request(summarize) == "aider" and any(p.search("I have *added these files to the chat* so you can edit them") for p in bare.pins)
    own = {"pin": ["^My header"], "pin_preamble": ["^My examples end"], "side_request": ["^Write a commit message"], "profiles": {"aider": False}}
    markers = parse_config({"model_list": [MODEL], "pcp": own}, environ={}).pcp.client_markers()
    assert markers.side_request(summarize) is None and markers.side_request([{"role": "system", "content": "Write a commit message"}]) == "config"
    assert [p.pattern for p in markers.pins] == ["^My header"] and [p.pattern for p in markers.preamble] == ["^My examples end"]
    assert markers.side_request([{"role": "system", "content": "You are a title generator. You output ONLY a thread title. Nothing else."}]) == "opencode"


def test_a_litellm_proxy_config_loads_and_ignores_foreign_sections(caplog: pytest.LogCaptureFixture) -> None:
    raw = {
        "model_list": [
            {"model_name": "gpt-4o", "litellm_params": {"model": "azure/gpt-4o", "api_base": "os.environ/AZURE_API_BASE", "rpm": 60}, "model_info": {"id": "x", "max_input_tokens": 128000}},
            {"model_name": "gpt-4o", "litellm_params": {"model": "openai/gpt-4o"}},
        ],
        "litellm_settings": {"drop_params": True, "success_callback": ["langfuse"]},
        "general_settings": {"master_key": "sk-1234"},
        "router_settings": {"routing_strategy": "simple-shuffle", "num_retries": 3},
        "environment_variables": {"X": "y"},
    }
    with caplog.at_level("INFO", logger="gateway.config"):
        config = parse_config(raw, environ={"AZURE_API_BASE": "https://example.invalid"})
    assert config.model_names == ("gpt-4o",)
    assert len(config.entries_for("gpt-4o")) == 2
    assert config.model_list[0].litellm_params["api_base"] == "https://example.invalid"
    assert config.router_settings["num_retries"] == 3
    ignored = " ".join(r.getMessage() for r in caplog.records)
    for section in ("litellm_settings", "environment_variables"):
        assert section in ignored
    assert config.general_settings.master_key == "sk-1234" and config.auth_enabled  # LiteLLM's master key keeps its meaning


def test_a_missing_environment_variable_becomes_none_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    raw = {"model_list": [{"model_name": "m", "litellm_params": {"model": "openai/m", "api_key": "os.environ/NOPE_KEY"}}]}
    config = parse_config(raw, environ={})
    assert config.model_list[0].litellm_params["api_key"] is None
    assert "NOPE_KEY" in caplog.text


def test_the_retired_short_anchor_key_still_loads_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config({"model_list": [MODEL], "pcp": {"short_anchor_tokens": 12}}, environ={})
    assert config.pcp.short_anchor_tokens == 12
    assert "short_anchor_tokens is deprecated" in caplog.text
    assert parse_config({"model_list": [MODEL]}, environ={}).pcp.short_anchor_tokens is None


def test_the_retired_adsorb_threshold_still_loads_with_a_warning_and_the_drift_keys_replace_it(caplog: pytest.LogCaptureFixture) -> None:
    config = parse_config({"model_list": [MODEL], "pcp": {"adsorb_threshold": 0.35}}, environ={})
    assert "adsorb_threshold is retired and ignored" in caplog.text and "drift_margin" in caplog.text
    assert (config.pcp.drift_margin, config.pcp.drift_overlap, config.pcp.drift_lookahead) == (0.15, 0.25, 3)
    tuned = parse_config({"model_list": [MODEL], "pcp": {"drift_margin": 0.1, "drift_overlap": 0.3, "drift_lookahead": 2}}, environ={})
    assert (tuned.pcp.drift_margin, tuned.pcp.drift_overlap, tuned.pcp.drift_lookahead) == (0.1, 0.3, 2)
    with pytest.raises(ConfigError, match="pcp.drift_lookahead"):
        parse_config({"model_list": [MODEL], "pcp": {"drift_lookahead": 0}}, environ={})


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({}, "model_list"),
        ({"model_list": []}, "model_list"),
        ({"model_list": [{"model_name": "m", "litellm_params": {}}]}, "model_list[0] (m).litellm_params"),
        ({"model_list": [{"litellm_params": {"model": "x"}}]}, "model_list[0].model_name"),
        ({"model_list": [MODEL], "pcp": {"budget_tokns": 10}}, "pcp.budget_tokns"),
        ({"model_list": [MODEL], "pcp": {"budget_tokens": -1}}, "pcp.budget_tokens"),
        ({"model_list": [MODEL], "server": {"port": "http"}}, "server.port"),
        ({"model_list": [MODEL], "pcp": {"pin": ["^ok", "(unclosed"]}}, "pcp.pin"),
        ({"model_list": [{**MODEL, "model_info": {"pcp_budget_tokens": 0}}]}, "model_list[0] (m).model_info"),
        ({"model_list": [{**MODEL, "model_info": {"pcp_budget_tokens": "lots"}}]}, "pcp_budget_tokens"),
        ({"model_list": [{**MODEL, "model_info": {"pcp_budget_tokens": True}}]}, "pcp_budget_tokens"),
        ({"model_list": [MODEL], "pcp": {"pin_preamble": "^not a list"}}, "pcp.pin_preamble"),
        ({"model_list": [MODEL], "pcp": {"side_request": ["(unclosed"]}}, "pcp.side_request"),
        ({"model_list": [MODEL], "pcp": {"profiles": {"aidr": False}}}, "unknown client profile(s) aidr"),
        ({"model_list": [MODEL], "store": {"data_dir": 5, "redis": "x"}}, "store."),
        ([1, 2], "top level"),
    ],
)
def test_a_bad_config_names_the_key(raw: object, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, environ={})
    assert named in str(caught.value)


def test_a_models_budget_is_the_smallest_of_its_deployments_and_the_configured_one_stands_for_the_rest() -> None:
    def deployment(name: str, **info: int) -> dict[str, object]:
        return {"model_name": name, "litellm_params": {"model": f"openai/{name}"}, "model_info": info}

    config = parse_config({
        "model_list": [deployment("coder", pcp_budget_tokens=12000), deployment("mixed", pcp_budget_tokens=9000), deployment("mixed"),
                       deployment("pair", pcp_budget_tokens=6000), deployment("pair", pcp_budget_tokens=3000), deployment("plain")],
        "pcp": {"budget_tokens": 5000},
    }, environ={})  # fmt: skip
    budgets = {name: config.budget_for(name) for name in (*config.model_names, "unlisted")}
    assert budgets == {"coder": 12000, "mixed": 5000, "pair": 3000, "plain": 5000, "unlisted": 5000}


def test_unreadable_and_invalid_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_list: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_check_config_accepts_the_shipped_config() -> None:
    result = _cli("check-config", "--config", str(ROOT / "config.yaml"))
    assert result.returncode == 0, result.stderr
    assert "gpt-4o-mini -> openai/gpt-4o-mini" in result.stdout


def test_check_config_rejects_a_bad_key_and_bad_router_settings(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("model_list:\n  - model_name: m\n    litellm_params: {model: openai/m}\npcp:\n  budgettokens: 3\n")
    result = _cli("check-config", "--config", str(bad))
    assert result.returncode == 2 and "pcp.budgettokens" in result.stderr
    bad.write_text("model_list:\n  - model_name: m\n    litellm_params: {model: openai/m}\nrouter_settings:\n  no_such_router_option: 1\n")
    result = _cli("check-config", "--config", str(bad))
    assert result.returncode == 2 and "router_settings" in result.stderr and "no_such_router_option" in result.stderr


def test_serve_with_a_bad_config_fails_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("model_list: []\n")
    result = _cli("serve", "--config", str(bad), "--port", "1")
    assert result.returncode == 2 and "model_list" in result.stderr


def test_litellm_settings_retries_and_fallbacks_reach_the_router_and_router_settings_win() -> None:
    raw = {
        "model_list": [{"model_name": m, "litellm_params": {"model": f"openai/{m}"}} for m in ("a", "b")],
        "litellm_settings": {"num_retries": 3, "request_timeout": 20, "fallbacks": [{"a": ["b"]}], "drop_params": True},
        "router_settings": {"num_retries": 1},
    }
    config = parse_config(raw, environ={})
    assert config.router_options == {"num_retries": 1, "timeout": 20, "fallbacks": [{"a": ["b"]}]}
    assert "drop_params" not in config.litellm_settings
