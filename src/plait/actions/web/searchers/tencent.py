"""Tencent Cloud web search (TC3-HMAC-SHA256 signed requests)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from urllib.parse import urlsplit

from typing_extensions import Unpack

from ....exceptions import APIResponseError
from ....types import JSONValue
from ..messages import HTTPRequest, HTTPResponse, as_dict, as_list
from ..tc3 import sign_request, tc3_headers
from ..tool import env_or, require
from .base import DEFAULT_BLACK_LIST, BaseSearch, SearchHit, SearchOptions, clean_snippet


def _tencent_page(page: object) -> Mapping[str, JSONValue]:
    if isinstance(page, str):
        try:
            page = json.loads(page)
        except ValueError:
            return {}
    page = as_dict(page)
    display = page.get("Display")
    if isinstance(display, str):
        try:
            display = json.loads(display)
        except ValueError:
            display = None
    return as_dict(display) or page


class TencentSearch(BaseSearch):
    """Tencent Cloud web search (``SearchCommon`` of ``tms``, or ``SearchPro`` of ``wsa``), TC3-signed.

    Args:
        secret_id: The SecretId (else ``$TENCENTCLOUD_SECRET_ID``).
        secret_key: The SecretKey (else ``$TENCENTCLOUD_SECRET_KEY``).
        api_key: A temporary-credential token, sent as ``X-TC-Token``.
        action: The API action.
        version: The API version.
        service: The service name used in the signature.
        host: The API host (signed, and the default endpoint).
        topk: Most results per query.
        tsn: Time filter (1 day, 2 week, 3 month, 4 year, 5 half year, 6 three years).
        insite: Search within one site only (``'zhihu.com'``).
        category: A vertical (``'baike'``, ``'news'``, ...).
        vrid: Result card types, comma separated.
        black_list: Result URLs containing any of these strings are dropped.
        region: The ``X-TC-Region`` header, when the product needs one.
        endpoint: Where to send the request (defaults to ``https://{host}/``).
        clock: Unix time source (tests pin it).
        **kwargs: `BaseSearch` options.
    """

    service = "Tencent Cloud search"

    def __init__(
        self,
        secret_id: str | None = None,
        secret_key: str | None = None,
        api_key: str | None = None,
        action: str = "SearchCommon",
        version: str = "2020-12-29",
        service: str = "tms",
        host: str = "tms.tencentcloudapi.com",
        topk: int = 3,
        tsn: int | None = None,
        insite: str | None = None,
        category: str | None = None,
        vrid: str | None = None,
        black_list: Iterable[str] | None = DEFAULT_BLACK_LIST,
        *,
        region: str | None = None,
        endpoint: str | None = None,
        clock: Callable[[], float] = time.time,
        **kwargs: Unpack[SearchOptions],
    ) -> None:
        super().__init__(topk, black_list, **kwargs)
        self._secret_id = require(
            env_or(secret_id, "TENCENTCLOUD_SECRET_ID"), "a Tencent Cloud secret_id", "TENCENTCLOUD_SECRET_ID"
        )
        self._secret_key = require(
            env_or(secret_key, "TENCENTCLOUD_SECRET_KEY"), "a Tencent Cloud secret_key", "TENCENTCLOUD_SECRET_KEY"
        )
        self._token = api_key or None
        self.action = action
        self.version = version
        self.tc_service = service
        self.host = host
        self.tsn, self.insite, self.category, self.vrid = tsn, insite, category, vrid
        self.region = region
        self.endpoint = endpoint or f"https://{host}/"
        self.clock = clock

    def build_request(self, query: str) -> HTTPRequest:
        """A signed POST of ``{"Query": ...}`` (plus the optional filters)."""
        body: dict[str, JSONValue] = {"Query": query}
        for key, value in (
            ("Tsn", self.tsn),
            ("Insite", self.insite),
            ("Category", self.category),
            ("Vrid", self.vrid),
        ):
            if value is not None:
                body[key] = value
        payload = json.dumps(body, ensure_ascii=False)
        signed = sign_request(
            secret_id=self._secret_id,
            secret_key=self._secret_key,
            service=self.tc_service,
            host=self.host,
            payload=payload,
            timestamp=int(self.clock()),
            action=self.action,
        )
        headers = tc3_headers(signed, action=self.action, version=self.version, region=self.region, token=self._token)
        if urlsplit(self.endpoint).hostname != self.host:
            headers.pop("Host")  # a mirror or test server: let the client send its own Host
        return HTTPRequest.build(
            "POST",
            self.endpoint,
            body=payload,
            headers=headers,
            secrets=[self._secret_key, self._token or "", signed.signature],
            service=self.service,
        )

    def parse_response(self, response: HTTPResponse) -> list[SearchHit]:
        """``Response.Pages`` (JSON strings or objects, optionally wrapped in ``Display``)."""
        data = as_dict(as_dict(self._json(response)).get("Response"))
        error = as_dict(data.get("Error"))
        if error:
            raise APIResponseError(
                f"Tencent Cloud reported {error.get('Code', 'an error')}: {error.get('Message', '')}"
            )
        hits: list[SearchHit] = []
        for page in map(_tencent_page, as_list(data.get("Pages"))):
            url = str(page.get("url") or "")
            if not url:
                continue
            summary = page.get("passage") or page.get("content") or page.get("abstract_info") or ""
            hits.append((url, clean_snippet(summary), clean_snippet(page.get("title", ""))))
        return hits
