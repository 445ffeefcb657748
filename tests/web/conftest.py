"""Fixtures for the web demo: a fake model server, the app under streamlit's AppTest, the served app, Chromium."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _webdemo_support import scripted_model, serve_app

from plait.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def fake_model(fake_server: Callable[..., FakeOpenAIServer]) -> Callable[..., FakeOpenAIServer]:
    """``fake_model(script=None, **options)``: `fake_server` answering with `scripted_model` by default."""

    def start(script: Any = None, **options: Any) -> FakeOpenAIServer:
        if script is None:
            options.setdefault("handler", scripted_model)
        return fake_server(script, **options)

    return start


@pytest.fixture
def web_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean ``PLAIT_WEB_*`` environment with session folders under `tmp_path`; returns that folder."""
    for name in list(os.environ):
        if name.startswith("PLAIT_WEB_"):
            monkeypatch.delenv(name)
    work = tmp_path / "sessions"
    monkeypatch.setenv("PLAIT_WEB_WORK_DIR", str(work))
    return work


@pytest.fixture
def served_app(web_env: Path) -> Iterator[str]:
    """The app served by ``plait web`` on a free port (a subprocess); yields its URL."""
    with serve_app() as url:
        yield url


def find_chromium() -> str | None:
    """Debian's Chromium (or ``$PLAIT_CHROMIUM``), installing it with scripts/ensure_chromium.sh if missing."""
    explicit = os.environ.get("PLAIT_CHROMIUM")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.path.exists(candidate):
            return candidate
    script = ROOT / "scripts" / "ensure_chromium.sh"
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") and script.exists():
        subprocess.run(["bash", str(script)], check=False, capture_output=True, timeout=900)
        if os.path.exists("/usr/bin/chromium"):
            return "/usr/bin/chromium"
    return None


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Chromium executable; when absent and not installable: skip, or fail under CI."""
    pytest.importorskip("playwright", reason="browser tests need playwright (the 'web' extra)")
    path = find_chromium()
    if path is None:
        reason = "Chromium is not installed and could not be installed (run scripts/ensure_chromium.sh as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)  # CI must run the browser tests, never skip them
        pytest.skip(reason)
    return path


@pytest.fixture
def browser(chromium_path: str) -> Iterator[Any]:
    """A headless Chromium driven by Playwright (Debian's binary, no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def artifacts_dir() -> Path:
    """Where browser tests keep screenshots: ``$PLAIT_ARTIFACTS`` or tests/web/artifacts (gitignored)."""
    path = Path(os.environ.get("PLAIT_ARTIFACTS") or Path(__file__).parent / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
