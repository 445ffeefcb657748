"""Fetch a page a model chose and turn it into readable, bounded text (SSRF-guarded)."""

from __future__ import annotations

import asyncio
import json

from ...exceptions import APIResponseError
from .client import WebClient
from .html_text import html_to_text
from .messages import HTTPRequest, HTTPResponse
from .ssrf import URLGuard

__all__ = ["ContentFetcher", "page_text"]

_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/rss+xml", "application/atom+xml")


def page_text(response: HTTPResponse) -> str:
    """The readable text of a fetched page (HTML -> text; plain text, JSON and XML as they are).

    Raises:
        APIResponseError: The page is not text (a PDF, an image, ...).
    """
    kind = response.content_type
    if kind in ("text/html", "application/xhtml+xml") or (not kind and b"<html" in response.body[:2048].lower()):
        return html_to_text(response.text())
    if kind == "application/json":
        try:
            return json.dumps(json.loads(response.text()), ensure_ascii=False, indent=1)
        except ValueError:
            return response.text()
    if not kind or kind.startswith(_TEXT_TYPES):
        return response.text().strip()
    raise APIResponseError(f"{response.url} is {kind}, not a text page; it cannot be read")


class ContentFetcher:
    """Downloads pages for a model: guarded against private addresses, bounded, cached.

    Args:
        timeout: Seconds per attempt.
        guard: Which URLs may be fetched (default: public addresses only).
        max_retry: Attempts per page.
        max_bytes: Bytes read per page.
        cache_ttl: Seconds a fetched page is reused.
        cache_size: Most pages cached.
    """

    def __init__(
        self,
        timeout: float = 5.0,
        *,
        guard: URLGuard | None = None,
        max_retry: int = 2,
        max_bytes: int = 5 * 1024 * 1024,
        cache_ttl: float = 600.0,
        cache_size: int = 100,
    ) -> None:
        self.guard = guard if guard is not None else URLGuard()
        self.client = WebClient.build(
            timeout=timeout,
            max_retry=max_retry,
            backoff=0.25,
            cache_ttl=cache_ttl,
            cache_size=cache_size,
            guard=self.guard,
            max_bytes=max_bytes,
        )

    async def afetch(self, url: str) -> str:
        """The readable text of `url`.

        Raises:
            WebError: The URL was refused, could not be fetched, or is not a text page.
        """
        self.guard.check_url(url)  # refuse early, with a clear message, before any IO
        response = await self.client.send(HTTPRequest.build("GET", url, headers={"Accept": "text/html,*/*;q=0.8"}))
        if len(response.body) < 64 * 1024:
            return page_text(response)
        return await asyncio.to_thread(page_text, response)  # a big page: parse it off the event loop

    async def aclose(self) -> None:
        """Close the HTTP session of the running loop."""
        await self.client.aclose()
