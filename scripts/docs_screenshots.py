"""Screenshots of the built documentation site in headless Chromium (issue 23).

Serves ``site/`` (build it first: ``make docs``) on 127.0.0.1 and saves the home page and one API
reference page as PNGs next to the web tests' artifacts (``tests/web/artifacts``, or ``$PLAIT_ARTIFACTS``).

Usage: ``.venv/bin/python scripts/docs_screenshots.py``
"""

from __future__ import annotations

import functools
import http.server
import os
import sys
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
PAGES = {"docs_home.png": "", "docs_reference_agents.png": "reference/agents/"}
CHROMIUM = os.environ.get("PLAIT_CHROMIUM", "/usr/bin/chromium")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keep the request log off the terminal."""


def main() -> int:
    """Take the screenshots; returns the exit status."""
    if not (SITE / "index.html").exists():
        sys.stderr.write("site/ is not built: run `make docs` first\n")
        return 2
    out = Path(os.environ.get("PLAIT_ARTIFACTS") or ROOT / "tests" / "web" / "artifacts")
    out.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            for name, path in PAGES.items():
                page.goto(base + path, wait_until="networkidle")
                page.screenshot(path=str(out / name))
                sys.stdout.write(f"{out / name}\n")
            browser.close()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
