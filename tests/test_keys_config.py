"""The keys section of the config, and when an open gateway may start."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.http.auth import exposure_problem, open_warning

MODELS = [{"model_name": "m", "litellm_params": {"model": "openai/m"}}, {"model_name": "n", "litellm_params": {"model": "openai/n"}}]


def test_keys_and_the_master_key_read_the_environment() -> None:
    raw = {
        "model_list": MODELS,
        "general_settings": {"master_key": "os.environ/MASTER", "database_url": "postgres://x", "alerting": ["slack"]},
        "keys": [{"key": "os.environ/ALICE", "tenant": "alice", "models": ["m"], "rpm": 5}, {"key": "sk-bob", "tenant": "bob"}],
    }
    config = parse_config(raw, environ={"MASTER": "sk-master", "ALICE": "sk-alice"})
    assert config.general_settings.master_key == "sk-master" and config.auth_enabled
    alice, bob = config.keys
    assert (alice.key, alice.tenant, alice.models, alice.rpm) == ("sk-alice", "alice", ("m",), 5)
    assert (bob.models, bob.rpm) == (None, None)


def test_an_unset_master_key_variable_means_no_master_key(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="gateway.config"):
        config = parse_config({"model_list": MODELS, "general_settings": {"master_key": "os.environ/NOPE"}}, environ={})
    assert config.general_settings.master_key is None and not config.auth_enabled
    assert "NOPE is not set" in caplog.text


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ([{"key": "os.environ/UNSET", "tenant": "a"}], "keys[0].key: environment variable UNSET is not set"),
        ([{"key": "k", "tenant": "a:b"}], "not a tenant name"),
        ([{"key": "k", "tenant": "a", "models": ["gpt-9"]}], "lists models not in model_list: gpt-9"),
        ([{"key": "k", "tenant": "a"}, {"key": "k", "tenant": "b"}], "listed twice"),
        ([{"key": "sk-master", "tenant": "a"}], "listed twice"),
        ([{"key": "k", "tenant": "a", "rpm": 0}], "keys[0].rpm"),
        ([{"key": "k", "tenant": "a", "budget": 3}], "keys[0].budget"),
        ([{"tenant": "a"}], "keys[0].key"),
    ],
)
def test_bad_keys_fail_at_start_naming_the_entry(keys: list[dict[str, object]], message: str) -> None:
    raw = {"model_list": MODELS, "general_settings": {"master_key": "sk-master"}, "keys": keys}
    with pytest.raises(ConfigError) as error:
        parse_config(raw, environ={})
    assert message in str(error.value)
    assert "sk-master" not in str(error.value)


def test_an_open_gateway_serves_only_on_loopback_unless_allowed() -> None:
    open_config = parse_config({"model_list": MODELS}, environ={})
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert exposure_problem(open_config, host) is None
    for host in ("0.0.0.0", "::", "10.1.2.3", "gateway.example"):
        assert "refusing to serve on" in (exposure_problem(open_config, host) or "")
    allowed = parse_config({"model_list": MODELS, "server": {"allow_open": True}}, environ={})
    keyed = parse_config({"model_list": MODELS, "keys": [{"key": "k", "tenant": "t"}]}, environ={})
    assert exposure_problem(allowed, "0.0.0.0") is None and exposure_problem(keyed, "0.0.0.0") is None
    assert "open to anyone who can reach 0.0.0.0:4000" in (open_warning(allowed, "0.0.0.0", 4000) or "")
    assert open_warning(keyed, "0.0.0.0", 4000) is None
