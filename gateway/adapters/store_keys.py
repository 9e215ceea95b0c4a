"""The Redis key layout of everything the gateway stores about threads (job keys live in job_queue).

Every key of a thread carries the thread's Redis Cluster hash tag, `<prefix>:{<tenant>:<thread>}:<what>`,
so a thread's keys share one slot and its multi-key transactions and scripts stay atomic on a cluster:

- `...:manifest`  hash   page id -> JSON manifest (everything but the content, plus the token counts
                         of its summary and background line, its term counts and its anchor text)
- `...:content`   hash   page id -> page content
- `...:vector`    hash   page id -> embedding of the page content (base64 float16); `<page id>:user` -> embedding of
                          its user's own messages (pages with a reply); `<page id>:sentences` -> embeddings of
                          their sentences, one after the other (where they are several); a vector another model
                          than the shipped one made is written `<model>|<base64>`; `@model` -> the model every
                          vector of the thread was made by, once the consolidator has re-embedded what another made
- `...:messages`  hash   page id -> an Original page's messages as JSON, only where its content cannot
                         give them back exactly (gateway.core.original)
- `...:units`     hash   `<page id>:<cut>` -> the page's excerpt units as a query reads them (JSON, zlib, base64;
                         the cut names the units' version, the tokenizer and the names the chat's sides are shown by:
                         gateway.service.page_excerpts): written when a query first cuts the page, read by a process
                         that has not cut it (a restarted gateway, or one whose memory let it go) instead of cutting
                         it again
- `...:log`       list   ids of original pages in the order they were first stored (consolidation input)
- `...:parent`    hash   page id -> id of the consolidated page that contains it
- `...:views`     hash   page id -> view (Detail / Unpacked; absent = Summary)
- `...:trace`     list   JSON reasoning-trace steps, oldest first, trimmed to a limit
- `...:segment`   hash   the consolidator's state: `cursor` into the log, `buffer` (JSON)
- `...:heat`      hash   page id -> times shown in Detail or consulted
- `...:seen`      hash   page id -> last such access (ISO 8601)
- `...:form`      string `paged` once a request of the thread was sent paged because its raw form no longer fit the
                         budget: the thread stays paged (gateway.core.form; absent: raw while it fits and is smaller)
- `...:layout`    string the thread's last request layout (gateway.core.scaffolding)
- `...:asked`     string JSON `[hash, time]`: the last request's live user message (a hash of its text) and when it
                         was sent; the exchange it opens is stored by the next request, and is dated by it
- `...:claims`    list   the answer claims the thread made in its tenant's index (below): what deleting it withdraws
- `...:version`   string a token that changes whenever a stored page's manifest or a parent link changes
                         (consolidation), set when the thread's first page is stored: what a process may
                         cache of the thread's pages is valid while it is unchanged (RedisStore.snapshot)
- `...:changes`   list   the last version changes, oldest first, each `<version before> <version after> <ids>`
                         (the pages whose manifest or parent link it wrote, comma-separated): what a process
                         that cached the thread at an earlier version reads again (the rest is unchanged)

Two keys are not per thread: `<prefix>:threads`, a sorted set of `<tenant>:<thread>` scored by the time
of the thread's last stored page, which the scheduler scans for idle buffers and merges; and
`<prefix>:tenant:<tenant>:threads`, the same for one tenant's threads (scored alike, members are thread
ids), which `GET /pcp/threads` pages through. Deleting a thread removes its keys and both entries.

`<prefix>:tenant:<tenant>:thread_of` is a hash from a claim (gateway.core.continuation: a stored exchange's
page id, the hash of a reply or a tool call id the gateway returned) to the thread that made it, or `*` when two
threads did: how a request that names no thread finds the one it continues. Deleting a thread withdraws the
claims that are its own (its pages' and those in its `...:claims` list).

Responses API turns are kept per tenant, not per thread (a response id is all a client sends back):
`<prefix>:response:<tenant>:<response id>`, a string of JSON with a TTL (see `response_store`). They need
no hash tag: each is read and written alone.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ThreadKey", "ThreadKeys", "threads_key", "tenant_threads_key", "tenant_index_key", "response_key"]


@dataclass(frozen=True)
class ThreadKey:
    """Who owns a thread: the tenant (derived from the API key) and the thread id."""

    tenant: str
    thread: str

    @property
    def scope(self) -> str:
        """`<tenant>:<thread>`, unique across tenants; what the job queue and the registry store."""
        return f"{self.tenant}:{self.thread}"

    @classmethod
    def from_scope(cls, scope: str) -> ThreadKey:
        tenant, _, thread = scope.partition(":")
        return cls(tenant, thread)


@dataclass(frozen=True)
class ThreadKeys:
    prefix: str
    thread: ThreadKey

    def _key(self, what: str) -> str:
        return f"{self.prefix}:{{{self.thread.scope}}}:{what}"

    @property
    def manifest(self) -> str:
        return self._key("manifest")

    @property
    def content(self) -> str:
        return self._key("content")

    @property
    def vector(self) -> str:
        return self._key("vector")

    @property
    def messages(self) -> str:
        return self._key("messages")

    @property
    def units(self) -> str:
        return self._key("units")

    @property
    def log(self) -> str:
        return self._key("log")

    @property
    def parent(self) -> str:
        return self._key("parent")

    @property
    def views(self) -> str:
        return self._key("views")

    @property
    def trace(self) -> str:
        return self._key("trace")

    @property
    def segment(self) -> str:
        return self._key("segment")

    @property
    def heat(self) -> str:
        return self._key("heat")

    @property
    def seen(self) -> str:
        return self._key("seen")

    @property
    def form(self) -> str:
        return self._key("form")

    @property
    def layout(self) -> str:
        return self._key("layout")

    @property
    def version(self) -> str:
        return self._key("version")

    @property
    def changes(self) -> str:
        return self._key("changes")

    @property
    def asked(self) -> str:
        return self._key("asked")

    @property
    def claims(self) -> str:
        return self._key("claims")

    def every(self) -> dict[str, str]:
        """Every key of the thread by what it holds (what deleting the thread removes)."""
        names = ("manifest", "content", "vector", "log", "parent", "views", "trace", "segment", "heat", "seen", "form", "layout", "messages", "version", "changes", "asked", "claims", "units")
        return {name: self._key(name) for name in names}


def threads_key(prefix: str) -> str:
    return f"{prefix}:threads"


def tenant_threads_key(prefix: str, tenant: str) -> str:
    return f"{prefix}:tenant:{tenant}:threads"


def tenant_index_key(prefix: str, tenant: str) -> str:
    return f"{prefix}:tenant:{tenant}:thread_of"


def response_key(prefix: str, tenant: str, response_id: str) -> str:
    return f"{prefix}:response:{tenant}:{response_id}"
