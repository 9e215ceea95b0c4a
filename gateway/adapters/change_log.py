"""A thread's change log: what each change of its version wrote, so that a process that cached the thread at an
earlier version reads again only those pages.

Every script that changes a thread's version (gateway.adapters.consolidation_store: a topic committed, a merge, a
summary rewritten) calls :data:`LOGGED`'s ``logged`` function, which sets the version and appends one entry to the
thread's ``changes`` list (`ThreadKeys.changes`): ``<version before> <version after> <page ids, comma-separated>``,
the last :data:`CHANGES_KEPT` kept. `RedisStore.snapshot` reads the list when it finds a version other than the one it
cached and follows it with :func:`changed_since`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CHANGES_KEPT", "LOGGED", "changed_since"]

CHANGES_KEPT = 64

# a Lua function for the scripts that change a version: prepend it to the script and call
# logged(version key, changes key, the fresh version token, {the page ids written})
LOGGED = f"""
local function logged(version, changes, token, ids)
  local before = redis.call('GET', version) or ''
  redis.call('SET', version, token)
  redis.call('RPUSH', changes, before .. ' ' .. token .. ' ' .. table.concat(ids, ','))
  redis.call('LTRIM', changes, -{CHANGES_KEPT}, -1)
end
"""


def changed_since(entries: Iterable[str | bytes], cached: str, version: str) -> set[str] | None:
    """The pages the changes from version ``cached`` to ``version`` wrote, by the log's ``entries`` (oldest first);
    ``None`` when the log does not lead from one to the other (more changes than it keeps, a thread deleted and
    stored anew, a version set by a writer that does not log)."""
    after: dict[str, tuple[str, str]] = {}
    for entry in entries:
        before, _, rest = (entry.decode() if isinstance(entry, bytes) else entry).partition(" ")
        token, _, ids = rest.partition(" ")
        after[before] = (token, ids)
    changed: set[str] = set()
    at = cached
    for _ in range(len(after) + 1):  # (each change at most once: tokens are never reused)
        if at == version:
            return changed
        step = after.get(at)
        if step is None:
            return None
        at, ids = step
        changed.update(i for i in ids.split(",") if i)
    return None
