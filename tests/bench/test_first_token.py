"""The first-token benchmark's servers: the timestamping upstream and the bare HTTP hop in front of the gateway's
upstream client, each in a process of its own, relay one streamed answer as the benchmark reads it."""

from __future__ import annotations

from bench.first_token import MODEL, Cases, Served, Upstream


def test_the_bare_hop_relays_the_upstream_s_stream_and_the_upstream_notes_its_arrival() -> None:
    upstream = Upstream()
    bare = Served("--serve-bare-hop", upstream.url)
    cases = Cases(upstream)
    try:
        messages = [{"role": "user", "content": "hi"}]
        to_upstream, after, total = cases.over_http(bare.url, {}, messages)  # (it waits for the content "ok")
        assert to_upstream > 0 and after >= 0 and total >= to_upstream
        with cases.http.stream("POST", bare.url + "/chat/completions", json={"model": MODEL, "stream": True, "messages": messages}) as response:
            lines = [line for line in response.iter_lines() if line]
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        assert lines[-1] == "data: [DONE]" and any('"content":"ok"' in line for line in lines)
    finally:
        cases.close()
        bare.stop()
        upstream.stop()
