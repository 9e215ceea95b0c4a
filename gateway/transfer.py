"""`pcp-gateway import` and `pcp-gateway export`: the services opened from the config, a progress bar, the output.

Both use the store the config names (`store.redis_url` / `REDIS_URL`, or the embedded Redis in
`store.data_dir`, attached to when a gateway already runs on it). `import --wait` runs consolidation workers in
this process until the imported threads have no pending job (a running gateway's workers share the work).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from gateway.adapters.store_keys import ThreadKey
from gateway.bootstrap import background_for, open_services
from gateway.config import GatewayConfig
from gateway.service.chat_files import Conversation, export_line
from gateway.service.importer import ImportProgress, Importer, ImportResult, export_messages
from gateway.service.ingest import Ingestion

__all__ = ["run_export", "run_import"]

POLL_SECONDS = 0.25


def _columns() -> tuple[TextColumn | BarColumn | MofNCompleteColumn | TimeElapsedColumn, ...]:
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pages stored: {task.fields[pages]}  consolidation jobs pending: {task.fields[pending]}"),
        TimeElapsedColumn(),
    )


async def _wait(importer: Importer, threads: Sequence[ThreadKey], progress: Progress, task: TaskID) -> None:
    """Until the threads' consolidation jobs are done; the bar counts them down."""
    pending = await importer.pending(threads)
    total = max(pending, 1)
    progress.update(task, description="consolidating", total=total, completed=total - pending, pending=pending)
    while pending:
        await asyncio.sleep(POLL_SECONDS)  # polling a queue other processes may also drain
        pending = await importer.pending(threads)
        total = max(total, pending)
        progress.update(task, total=total, completed=total - pending, pending=pending)


async def _import(
    config: GatewayConfig, conversations: Sequence[Conversation], tenant: str, thread: str | None, wait: bool, console: Console
) -> ImportResult:
    async with open_services(config) as services:
        importer = Importer(Ingestion(services.store, config.pcp, services.embedder), services.consolidator)
        with Progress(*_columns(), console=console, transient=False) as progress:
            task = progress.add_task("importing", total=None, pages=0, pending=0)

            def show(state: ImportProgress) -> None:
                progress.update(task, total=state.requests_total, completed=state.requests_done,
                                pages=state.pages_added, pending=state.pending_jobs)  # fmt: skip

            result = await importer.run(conversations, tenant, datetime.now(timezone.utc), thread=thread, on_progress=show)
            if wait and services.consolidator is not None:
                background = background_for(config, services, 1)
                assert background is not None
                await background.start()
                try:
                    await _wait(importer, result.threads, progress, task)
                finally:
                    await background.stop()
    return result


def run_import(
    config: GatewayConfig, conversations: Sequence[Conversation], tenant: str, thread: str | None, wait: bool, err: TextIO = sys.stderr
) -> int:
    """Import, show progress on ``err``, print what was stored; the exit status."""
    console = Console(file=err)
    result = asyncio.run(_import(config, conversations, tenant, thread, wait, console))
    for key in result.threads:
        console.print(f"thread {key.thread} (tenant {key.tenant})")
    note = f"; {result.unsealed} trailing message(s) without a reply not stored" if result.unsealed else ""
    console.print(f"{result.pages_added} new page(s) stored in {len(result.threads)} thread(s){note}")
    if not config.pcp.consolidation:
        console.print("pcp.consolidation is off: nothing to consolidate")
    elif not wait:
        console.print("consolidation runs in the gateway's workers (or `pcp-gateway worker`); --wait waits for it here")
    return 0


async def _export(config: GatewayConfig, thread: ThreadKey) -> list[dict[str, object]]:
    async with open_services(config, embed=False) as services:
        return await export_messages(services.store, thread)


def run_export(config: GatewayConfig, thread: ThreadKey, output: Path | None, out: TextIO = sys.stdout) -> int:
    messages = asyncio.run(_export(config, thread))
    if not messages:
        print(f"pcp-gateway: thread {thread.thread} of tenant {thread.tenant} has no stored messages", file=sys.stderr)
        return 1
    line = export_line(thread.thread, messages) + "\n"
    if output is None:
        out.write(line)
    else:
        output.write_text(line, encoding="utf-8")
    return 0
