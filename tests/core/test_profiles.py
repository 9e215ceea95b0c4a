"""Client profiles: the built-in markers of aider's and opencode's fixed wording, and the config's additions."""

from __future__ import annotations

import re

import pytest

from gateway.core.profiles import PROFILES, client_markers


def test_the_built_in_profiles_are_on_unless_turned_off() -> None:
    every = client_markers()
    assert {p.pattern for p in every.pins} == {p for profile in PROFILES for p in profile.pins}
    no_aider = client_markers(off=["aider"])
    assert not no_aider.pins and not no_aider.preamble and {whose for whose, _ in no_aider.side_requests} == {"opencode"}
    assert not client_markers(off=[p.name for p in PROFILES]).side_requests


def test_a_side_request_is_known_by_its_first_system_message() -> None:
    markers = client_markers()
    summarize = "*Briefly* summarize this partial conversation about programming.\nInclude less detail about older parts"
    assert markers.side_request([{"role": "system", "content": summarize}, {"role": "user", "content": "# USER\nhi"}]) == "aider"
    title = [{"type": "text", "text": "You are a title generator. You output ONLY a thread title. Nothing else.\n..."}]
    assert markers.side_request([{"role": "system", "content": title}, {"role": "user", "content": "hello"}]) == "opencode"
    # the same words anywhere else are conversation: quoted by a user, or in a system prompt that does not open with them
    assert markers.side_request([{"role": "user", "content": summarize}]) is None
    assert markers.side_request([{"role": "system", "content": "Be brief. " + summarize}]) is None
    assert markers.side_request([]) is None


def test_the_config_adds_markers_once_and_a_bad_one_is_refused() -> None:
    aider = next(p for p in PROFILES if p.name == "aider")
    markers = client_markers(pins=[aider.pins[0], "^Mine"], side_requests=["^Commit message"])
    assert [p.pattern for p in markers.pins].count(aider.pins[0]) == 1 and markers.pins[-1].pattern == "^Mine"
    assert markers.side_request([{"role": "developer", "content": "Commit message for this diff"}]) == "config"
    with pytest.raises(ValueError, match="unknown client profile.*aidr.*known: aider, opencode"):
        client_markers(off=["aidr"])
    with pytest.raises(re.error):
        client_markers(pins=["(unclosed"])
