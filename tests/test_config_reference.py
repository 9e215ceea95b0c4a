"""The configuration reference (docs/configuration.md) cannot drift from the settings classes: every key has its
line, every line its key, and the committed page is what the code renders."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.config import GatewayConfig, PcpSettings
from gateway.config_reference import MARKERS, MODEL_INFO_KEYS, PAGE, keys, render_reference, write_reference

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_page_is_what_the_settings_classes_render() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert write_reference(text) == text, "docs/configuration.md is stale: run .venv/bin/python -m gateway.config_reference"


def test_a_setting_added_without_its_line_fails() -> None:
    class Knobbed(PcpSettings):
        new_knob: int = 3

    class Config(GatewayConfig):
        pcp: Knobbed = Knobbed()

    with pytest.raises(ValueError, match=r"no line for pcp\.new_knob"):
        render_reference(Config)


def test_every_key_of_every_section_is_in_the_table() -> None:
    table = render_reference()
    for key, _, default in keys():
        assert f"| `{key}` |" in table
    assert "| `pcp.budget_tokens` | int (> 0) | `4000` |" in table
    assert "`source`" not in table  # set by load_config, not written in a file
    begin, end = MARKERS
    assert begin in PAGE.read_text(encoding="utf-8") and end in PAGE.read_text(encoding="utf-8")


def test_every_model_info_key_the_gateway_reads_is_documented() -> None:
    read = set()
    for path in (ROOT / "gateway").rglob("*.py"):
        read |= set(re.findall(r"\b(?:model_)?info\.get\(\"([a-z_]+)\"", path.read_text(encoding="utf-8")))
    assert read and read <= MODEL_INFO_KEYS.keys(), f"document in MODEL_INFO_KEYS: {sorted(read - MODEL_INFO_KEYS.keys())}"
