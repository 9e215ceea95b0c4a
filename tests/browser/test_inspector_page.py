"""The inspector page in a real browser: Debian's headless Chromium driven by Playwright (opt-in: `pytest -m browser`;
`scripts/setup-browser` installs both; without them the test skips).

A thread with consolidated pages is imported (`pcp-gateway import --wait`), then, using the keyboard where a person
would: the key is entered, the thread opened from the list, a consolidated page expanded and its content shown,
and the "what would the model see" panel asked. The screenshot (1280 px wide) is saved as an artifact:
`$PCP_ARTIFACTS_DIR/inspector.png` when that is set, else in the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support.chat_exports import run_cli, write_export
from tests.support.fake_upstream import FakeUpstream
from tests.support.gateway_process import GatewayProcess, gateway_config
from tests.support.topics import TOPICS, chat_messages

pytestmark = pytest.mark.browser

KEY = "sk-browser"
THREAD = "browser-topics"
CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser")


def chromium() -> str:
    path = os.environ.get("PCP_CHROMIUM") or next((found for name in CANDIDATES if (found := shutil.which(name))), None)
    if not path:
        pytest.skip("no Chromium (scripts/setup-browser installs Debian's chromium-headless-shell)")
    return path


@pytest.fixture(scope="module")
def gateway(fake: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("browser")
    config = gateway_config(fake.url, workdir / "data", embedded=True, pcp={"recent_turns": 1})
    (workdir / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    export = write_export(workdir / "conversations.json", THREAD, chat_messages(*TOPICS))
    done = run_cli(workdir / "config.yaml", "import", str(export), "--wait", "--api-key", KEY)
    assert done.returncode == 0, done.stderr
    with GatewayProcess(config=config, workdir=workdir) as process:
        yield process


def test_a_person_opens_a_consolidated_page_and_asks_what_the_model_would_see(gateway: GatewayProcess, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (scripts/setup-browser)")
    executable = chromium()
    artifacts = Path(os.environ.get("PCP_ARTIFACTS_DIR") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.goto(gateway.root_url + "/pcp/ui")

            page.fill("#api-key", KEY)
            page.press("#api-key", "Enter")  # the key form submits from the keyboard
            thread_button = page.locator(f'#threads button[data-thread="{THREAD}"]')
            thread_button.focus()
            page.keyboard.press("Enter")
            page.wait_for_selector("#thread-body:not([hidden])")
            assert page.locator("#thread-title").inner_text() == f"Thread {THREAD}"
            assert thread_button.get_attribute("aria-current") == "true"
            assert "Pending jobs" in page.locator("#thread-facts").inner_text()

            container = page.locator("#tree > li > details").first
            container.locator("summary").focus()
            page.keyboard.press("Enter")  # <details> opens from the keyboard
            assert container.get_attribute("open") is not None
            head = container.locator("summary").inner_text()
            assert "[Consolidated]" in head and "view: " in head and "tokens" in head  # readable without colour
            children = container.locator(":scope > ul > li")
            assert children.count() >= 2 and "[Original]" in children.first.inner_text()
            container.locator(":scope > button", has_text="Show content").click()
            content = container.locator(":scope > pre")
            content.wait_for(state="visible")
            assert content.inner_text().strip()

            page.fill("#question", "How much salt goes in the pasta water?")
            page.fill("#budget", "900")
            page.locator("#context-form button[type=submit]").click()
            page.wait_for_selector("#context-result:not([hidden])")
            assert "<PagedContext" in page.locator("#context-system").inner_text()
            facts = page.locator("#context-facts").inner_text()
            assert "of a 900-token budget" in facts

            container.scroll_into_view_if_needed()
            page.screenshot(path=str(artifacts / "inspector.png"), full_page=True)
            assert errors == []
            assert all(url.startswith(gateway.root_url) for url in requested)  # nothing loaded from elsewhere
        finally:
            browser.close()
    assert (artifacts / "inspector.png").stat().st_size > 10_000
