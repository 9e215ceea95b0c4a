from __future__ import annotations

import json

import pytest

from gateway.core.tools import NO_REASON, ToolArgError, ZoomArgs, completed_json, consult_schema, parse_zoom_arguments, shelve_schema


@pytest.mark.parametrize(("schema", "name"), [(consult_schema(), "Consult"), (shelve_schema("pcp_shelve"), "pcp_shelve")])
def test_schemas_are_openai_functions(schema: dict[str, object], name: str) -> None:
    assert schema["type"] == "function"
    function = schema["function"]
    assert isinstance(function, dict)
    assert function["name"] == name
    assert function["description"]
    parameters = function["parameters"]
    assert parameters["required"] == ["ids", "reason"]
    assert list(parameters["properties"]) == ["ids", "reason"]  # written in this order: a call cut short keeps its ids
    assert parameters["properties"]["ids"]["type"] == "array"
    assert parameters["properties"]["ids"]["items"] == {"type": "string"}
    assert parameters["properties"]["reason"]["type"] == "string"
    assert all(p["description"] for p in parameters["properties"].values())
    json.dumps(schema)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"reason": "need the port", "ids": ["a1b2c3d4e5", "b1b2c3d4e5"]}', ZoomArgs("need the port", ("a1b2c3d4e5", "b1b2c3d4e5"))),
        ('{"reason": "r", "ids": "a1b2c3d4e5"}', ZoomArgs("r", ("a1b2c3d4e5",))),
        ('{"reason": "r", "id": " A1B2C3D4E5 "}', ZoomArgs("r", ("a1b2c3d4e5",))),
        ('{"reason": "r", "ids": "a1b2c3d4e5, b1b2c3d4e5 a1b2c3d4e5"}', ZoomArgs("r", ("a1b2c3d4e5", "b1b2c3d4e5"))),
        ('{"reason": "r", "ids": [12345678, "\\"b1b2c3d4e5\\""]}', ZoomArgs("r", ("12345678", "b1b2c3d4e5"))),
        ('{"reason": "r", "ids": ["[a1b2c3d4e5]", "[\'B1B2C3D4E5\']"]}', ZoomArgs("r", ("a1b2c3d4e5", "b1b2c3d4e5"))),  # as shown
        ('{"ids": ["a1b2c3d4e5"]}', ZoomArgs(NO_REASON, ("a1b2c3d4e5",))),
        ('{"ids": ["a1b2c3d4e5"], "reason": 5}', ZoomArgs(NO_REASON, ("a1b2c3d4e5",))),
        (json.dumps(json.dumps({"reason": "twice", "ids": ["a1b2c3d4e5"]})), ZoomArgs("twice", ("a1b2c3d4e5",))),
        ({"reason": "mapping", "ids": ["a1b2c3d4e5"]}, ZoomArgs("mapping", ("a1b2c3d4e5",))),
    ],
)
def test_parse_is_forgiving(raw: str, expected: ZoomArgs) -> None:
    assert parse_zoom_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "hint"),
    [
        ("", "no arguments"),
        ('{"reason": "r", "ids": [', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"reason": "r"}', "must be a list"),
        ('{"reason": "r", "ids": [["a"]]}', "must be a list"),
        ('{"reason": "r", "ids": true}', "must be a list"),
        ('{"reason": "r", "ids": {"a": 1}}', "must be a list"),
        ('{"reason": "r", "ids": [" ", ""]}', "at least one page id"),
        (json.dumps(""), "no arguments"),
    ],
)
def test_unusable_arguments_become_a_message_for_the_model(raw: str, hint: str) -> None:
    parsed = parse_zoom_arguments(raw, tool="pcp_consult")
    assert isinstance(parsed, ToolArgError)
    assert hint in parsed.message
    assert "Call pcp_consult again" in parsed.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Qwen2.5-Coder-1.5B's Consult call as max_tokens ended it (tests/real_model): the id being written is left out
        ('{"reason": "the code", "ids": ["63310873f6", "eda227c69c", "eda227c6', '{"reason": "the code", "ids": ["63310873f6", "eda227c69c"]}'),
        ('{"reason": "a \\"quoted\\", word", "ids": ["a1", "b', '{"reason": "a \\"quoted\\", word", "ids": ["a1"]}'),
        ('{"reason": "why", "ids', '{"reason": "why"}'),
        ('{"reason": "cut in the reas', "{}"),
        ('{"a": {"b": [1, {"c": 2}, 3', '{"a": {"b": [1, {"c": 2}]}}'),  # 3 may have been 35: left out too
        ('{"ids": ["a1"]}', '{"ids": ["a1"]}'),
        ("[1, 2", None),  # not an object
        ('{"ids": ["a1"]]', None),  # a bracket that closes nothing open
        ("no json", None),
    ],
)
def test_a_json_object_cut_short_is_completed_as_far_as_it_was_written(text: str, expected: str | None) -> None:
    completed = completed_json(text)
    assert completed == expected
    if completed is not None:
        assert isinstance(json.loads(completed), dict)


def test_a_call_cut_after_a_whole_id_is_read_for_the_ids_it_holds() -> None:
    assert parse_zoom_arguments('{"reason": "r", "ids": ["a1b2c3d4e5", "b1b2', tool="pcp_consult") == ZoomArgs("r", ("a1b2c3d4e5",))
    cut_early = parse_zoom_arguments('{"reason": "r", "ids": ["a1b2', tool="pcp_consult")
    assert isinstance(cut_early, ToolArgError) and "not valid JSON" in cut_early.message
