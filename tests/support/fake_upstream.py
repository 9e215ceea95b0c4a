"""Scripted fake OpenAI upstream for the test harness.

Owns: a real HTTP/1.1 server on 127.0.0.1 (random port, stdlib only, one daemon
thread per connection) that speaks the OpenAI chat-completions wire format.
Tests script, per request, what ``POST /v1/chat/completions`` answers (FIFO
queue of ``Reply`` / ``Error`` / ``BrokenStream`` or callables computing one from
the ``Recorded`` request) and inspect every request received.

Wire details: JSON responses carry Content-Length (keep-alive works); streamed
responses are SSE over chunked transfer encoding, so a ``BrokenStream`` (socket
closed without the terminating chunk) surfaces client-side as an incomplete
chunked read (httpx.RemoteProtocolError), just like a real mid-stream drop.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 10
    completion_tokens: int = 5

    def as_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # a JSON string, exactly as OpenAI sends it
    id: str | None = None  # None -> generated "call_<n>"


@dataclass(frozen=True)
class Reply:
    content: str | None = "ok"
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None  # None -> "tool_calls" if tool_calls else "stop"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None  # None -> echo the request's model
    chunk_size: int = 4  # characters per streamed content / tool-argument delta
    delay: float = 0.0  # seconds before the status line is sent
    chunk_delay: float = 0.0  # seconds between streamed chunks
    alternatives: tuple[str, ...] = ()  # the contents of choices 1, 2, ... (a request with n > 1); streamed interleaved


@dataclass(frozen=True)
class Error:
    status: int
    message: str = "fake upstream error"
    type: str | None = None  # None -> derived from status (see _ERROR_DEFAULTS)
    code: str | None = None  # None -> derived from status (e.g. 429 -> rate_limit_exceeded)
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokenStream:
    """Stream the role chunk, ``content_before`` and the tool-call deltas, then drop the
    socket without finish chunk / [DONE] / terminating HTTP chunk. For a non-stream request:
    send a Content-Length larger than the truncated JSON actually sent, then drop."""

    content_before: str = "partial"
    tool_calls: list[ToolCall] = field(default_factory=list)
    chunk_size: int = 4
    delay: float = 0.0


Response = Union[Reply, Error, BrokenStream]
Scripted = Union[Response, Callable[["Recorded"], Response]]


def Slow(seconds: float, **kwargs: Any) -> Reply:
    """A reply that waits ``seconds`` before answering (does not block other requests)."""
    return Reply(delay=seconds, **kwargs)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any] | None  # parsed JSON object, else None
    raw: bytes


_ERROR_DEFAULTS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}

MODELS = {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake", "created": 0}]}


class _Aborted(Exception):
    """The fake is stopping (or the client went away): drop the connection."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, fake: FakeUpstream) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._serve_one, args=(request, client_address), daemon=True)
        with self.fake._lock:
            self.fake._conns[thread] = request
        thread.start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.fake._lock:
                self.fake._conns.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # dropped connections are expected (stop(), client timeouts, BrokenStream)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each small write of a kept-alive connection waits ~40 ms for an ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        fake = self.server.fake
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        rec = Recorded(self.command, self.path, headers, body if isinstance(body, dict) else None, raw)
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            if self.command == "GET" and path.endswith("/models"):
                fake._record(rec)
                self._send_json(200, MODELS)
            elif self.command == "POST" and path.endswith("/chat/completions"):
                self._respond(fake._record(rec, take=True), rec)
            else:
                fake._record(rec)
                self._send_json(404, _error_body(Error(404, f"no route {self.command} {path}", code="not_found")))
        except (_Aborted, OSError):
            self.close_connection = True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.server.fake._stopping.wait(seconds):
            raise _Aborted

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _respond(self, resp: Response, rec: Recorded) -> None:
        body = rec.body or {}
        stream = bool(body.get("stream"))
        self._sleep(resp.delay)
        if isinstance(resp, Error):
            self._send_json(resp.status, _error_body(resp), resp.headers)
            return
        fake = self.server.fake
        model = (resp.model if isinstance(resp, Reply) else None) or str(body.get("model", "fake-model"))
        cid = f"chatcmpl-fake-{next(fake._ids)}"
        calls = [(tc, tc.id or f"call_{next(fake._call_ids)}") for tc in resp.tool_calls]
        if isinstance(resp, BrokenStream):
            self._broken(resp, stream, cid, model, calls)
        elif stream:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(resp, cid, model, calls, include_usage)
        else:
            message: dict[str, Any] = {"role": "assistant", "content": resp.content}
            if calls:
                message["tool_calls"] = [_call_json(tc, cid_) for tc, cid_ in calls]
            others = [{"index": i, "message": {"role": "assistant", "content": text}, "logprobs": None, "finish_reason": "stop"}
                      for i, text in enumerate(resp.alternatives, start=1)]
            self._send_json(200, {
                "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": _finish(resp, calls)}, *others],
                "usage": resp.usage.as_dict()})

    def _deltas(self, resp: Reply | BrokenStream, calls: list[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
        content = resp.content_before if isinstance(resp, BrokenStream) else resp.content
        n = max(1, resp.chunk_size)
        # like OpenAI: content "" in the role delta, null when the reply has no content at all
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": None if content is None else ""}]
        text = content or ""
        deltas += [{"content": text[i:i + n]} for i in range(0, len(text), n)]
        for index, (tc, call_id) in enumerate(calls):
            deltas.append({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                           "function": {"name": tc.name, "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": index, "function": {"arguments": tc.arguments[i:i + n]}}]}
                       for i in range(0, len(tc.arguments), n)]
        return deltas

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _event(self, obj: Any) -> None:
        self._chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")

    def _stream(self, resp: Reply, cid: str, model: str, calls: list[tuple[ToolCall, str]],
                include_usage: bool) -> None:
        def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
            obj = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                   "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return {**obj, "usage": None} if include_usage else obj

        # each choice's deltas, taken in turn (as OpenAI streams n > 1: one choice per chunk, interleaved)
        # and each choice's finish chunk right after its last delta, so a shorter choice finishes first
        streams = [[(0, d, None) for d in self._deltas(resp, calls)] + [(0, {}, _finish(resp, calls))]]
        streams += [[(i, d, None) for d in self._deltas(Reply(content=text, chunk_size=resp.chunk_size), [])] + [(i, {}, "stop")]
                    for i, text in enumerate(resp.alternatives, start=1)]
        self._start_sse()
        try:
            for step in itertools.zip_longest(*streams):
                for index, delta, finish in filter(None, step):
                    self._event(chunk(delta, finish, index=index))
                    self._sleep(resp.chunk_delay)
        except OSError:  # the client closed the stream before its end
            with self.server.fake._lock:
                self.server.fake.closed_early.append(cid)
            raise
        if include_usage:
            self._event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                         "model": model, "choices": [], "usage": resp.usage.as_dict()})
        self._event(b"[DONE]")
        self._chunk(b"")  # terminating zero-length chunk: the connection stays reusable

    def _broken(self, resp: BrokenStream, stream: bool, cid: str, model: str,
                calls: list[tuple[ToolCall, str]]) -> None:
        if stream:
            self._start_sse()
            for delta in self._deltas(resp, calls):
                self._event({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                             "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b'{"id": "' + cid.encode() + b'", "object": "chat.completion", "choi')
        self.connection.shutdown(socket.SHUT_RDWR)
        raise _Aborted


def _finish(resp: Reply, calls: list[tuple[ToolCall, str]]) -> str:
    return resp.finish_reason or ("tool_calls" if calls else "stop")


def _call_json(tc: ToolCall, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}


def _error_body(err: Error) -> dict[str, Any]:
    kind, code = _ERROR_DEFAULTS.get(err.status, ("server_error" if err.status >= 500 else "invalid_request_error", None))
    return {"error": {"message": err.message, "type": err.type or kind, "param": None, "code": err.code or code}}


class FakeUpstream:
    """A scripted OpenAI-compatible upstream. ``with FakeUpstream() as fake: ...``"""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.closed_early: list[str] = []  # ids of streamed completions whose client hung up mid-stream
        self.default: Response = Reply(content="ok")
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._conns: dict[threading.Thread, socket.socket] = {}
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeUpstream:
        if self._server is not None:
            raise RuntimeError("FakeUpstream already started")
        self._stopping = threading.Event()  # restartable after stop() (on a new port)
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-upstream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every live connection; in-flight delays are cut short."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            live = dict(self._conns)
        for sock in live.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + 2.0
        for thread in [*live, self._thread]:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeUpstream is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *responses: Scripted) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        """How many scripted responses have not been consumed yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.closed_early.clear()

    @property
    def chat_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.split("?")[0].rstrip("/").endswith("/chat/completions")]

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[Recorded]:
        """Block until at least ``n`` requests have arrived; return a snapshot of them all."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.requests) >= n, timeout):
                raise TimeoutError(f"expected {n} requests within {timeout}s, got {len(self.requests)}")
            return list(self.requests)

    def _record(self, rec: Recorded, take: bool = False) -> Response:
        """Record ``rec``; with ``take``, atomically pop its scripted response (else default)."""
        with self._arrived:
            self.requests.append(rec)
            self._arrived.notify_all()
            item = (self._queue.popleft() if self._queue else self.default) if take else self.default
        return item(rec) if callable(item) else item
