"""The request body's JSON (gateway.http.validation.json_object): orjson's reading where it has one, `json`'s where
orjson refuses, the same object either way."""

from __future__ import annotations

import json
import math

import pytest

from gateway.errors import InvalidRequest
from gateway.http.validation import json_object


def test_a_body_reads_as_json_reads_it() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "caf\u00e9 \U0001f600 \\ \" \u2028"}], "temperature": 0.7,
                       "seed": 2**63 - 1, "stream": True, "metadata": {"a": None, "b": [1, 2.5e-8]}}).encode()
    assert json_object(body) == json.loads(body)


def test_what_orjson_refuses_json_still_reads() -> None:
    # NaN and an infinity are not JSON, but Python's json (and so the gateway, always) reads them
    data = json_object(b'{"model": "m", "temperature": NaN, "top_p": 1e400}')
    assert math.isnan(data["temperature"]) and data["top_p"] == math.inf


@pytest.mark.parametrize(("body", "said"), [
    (b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', "lone UTF-16 surrogate"),
    (b'{"model": "m",}', "not valid JSON"),
    (b'[1, 2]', "must be a JSON object"),
    (b'{"a": ' * 1500 + b"1" + b"}" * 1500, "nested too deeply"),
    (b'{"a": "\xff"}', "not valid JSON"),
])
def test_what_neither_reads_is_refused_with_what_is_wrong(body: bytes, said: str) -> None:
    with pytest.raises(InvalidRequest, match=said):
        json_object(body)
