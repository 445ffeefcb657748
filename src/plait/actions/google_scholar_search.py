"""`GoogleScholar` / `AsyncGoogleScholar`: Google Scholar through SerpAPI's JSON API.

Four APIs: article search, author information, citation formats, author id lookup. The
key is SerpAPI's (``api_key=`` or ``$SERPAPI_API_KEY``; an explicit key always wins); it
travels as a query parameter and is redacted from every error. The endpoint is
configurable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import ClassVar, Optional, TypeAlias, Union

from typing_extensions import Unpack

from ..schema import ActionReturn
from ..types import JSONValue
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser
from .web import (
    APIResponseError,
    HTTPRequest,
    WebToolMixin,
    WebToolOptions,
    as_data,
    as_dict,
    as_list,
    env_or,
    require,
)

__all__ = [
    "AsyncGoogleScholar",
    "GoogleScholar",
    "parse_author",
    "parse_author_id",
    "parse_citation",
    "parse_scholar_results",
]

SERVICE = "SerpAPI"

_Param: TypeAlias = Union[str, int, None]
"""What a Google Scholar API parameter holds."""


def _checked(data: object) -> Mapping[str, JSONValue]:
    body = as_dict(data)
    if body.get("error"):
        raise APIResponseError(f"SerpAPI reported an error: {body['error']}")
    return body


def parse_scholar_results(data: object, top: int = 3) -> dict[str, list[JSONValue]]:
    """The first `top` organic results as parallel lists (title, cited_by, organic_id, snippets, pub_info)."""
    out: dict[str, list[JSONValue]] = {"title": [], "cited_by": [], "organic_id": [], "snippets": [], "pub_info": []}
    for item in map(as_dict, as_list(_checked(data).get("organic_results"))[:top]):
        out["title"].append(item.get("title", ""))
        out["cited_by"].append(as_dict(as_dict(item.get("inline_links")).get("cited_by")).get("total", ""))
        out["organic_id"].append(item.get("result_id", ""))
        out["snippets"].append(item.get("snippet", ""))
        out["pub_info"].append(as_dict(item.get("publication_info")).get("summary", ""))
    return out


def parse_author(data: object, top: int = 3) -> dict[str, JSONValue]:
    """Name, affiliations, website, interests, citation metrics and the first `top` articles."""
    body = _checked(data)
    author = as_dict(body.get("author"))
    if not author:
        raise APIResponseError("SerpAPI found no author with that id")
    metrics: dict[str, JSONValue] = {}
    for row in map(as_dict, as_list(as_dict(body.get("cited_by")).get("table"))):
        for name, values in row.items():
            metrics[name] = as_dict(values).get("all")
    return {
        "name": author.get("name", ""),
        "affiliations": author.get("affiliations", ""),
        "website": author.get("website", ""),
        "interests": [as_dict(i).get("title", "") for i in as_list(author.get("interests"))],
        "cited_by": metrics,
        "articles": [
            {
                "title": a.get("title", ""),
                "authors": a.get("authors", ""),
                "year": a.get("year", ""),
                "cited_by": as_dict(a.get("cited_by")).get("value"),
            }
            for a in map(as_dict, as_list(body.get("articles"))[:top])
        ],
    }


def parse_citation(data: object) -> dict[str, JSONValue]:
    """``{'citation': the MLA text, 'formats': {style: text}}``."""
    citations = [as_dict(c) for c in as_list(_checked(data).get("citations"))]
    if not citations:
        raise APIResponseError("SerpAPI returned no citation for that id")
    formats = {str(c.get("title", "")): c.get("snippet", "") for c in citations}
    return {"citation": formats.get("MLA") or citations[0].get("snippet", ""), "formats": formats}


def parse_author_id(data: object) -> dict[str, str]:
    """``{'author_id': ...}`` of the first profile found."""
    profiles = [as_dict(p) for p in as_list(_checked(data).get("profiles"))]
    if not profiles or not profiles[0].get("author_id"):
        raise APIResponseError("SerpAPI found no Google Scholar profile for that name")
    return {"author_id": str(profiles[0]["author_id"]), "name": str(profiles[0].get("name", ""))}


class _GoogleScholarCore(WebToolMixin, ActionCore, register=False):
    """What `GoogleScholar` and `AsyncGoogleScholar` share (the arguments are `GoogleScholar`'s)."""

    client_defaults: ClassVar[WebToolOptions] = {"timeout": 20.0, "max_retry": 3, "backoff": 0.5, "cache_ttl": 600.0}

    def __init__(
        self,
        api_key: str | None = None,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        endpoint: str = "https://serpapi.com/search.json",
        **options: Unpack[WebToolOptions],
    ) -> None:
        super().__init__(description, parser, enable)
        self._api_key = require(
            env_or(api_key, "SERPAPI_API_KEY"), "GoogleScholar's SerpAPI key (api_key=)", "SERPAPI_API_KEY"
        )
        self.endpoint = endpoint
        self.client = self._client_for(options)

    def build_request(self, engine: str, params: Mapping[str, _Param]) -> HTTPRequest:
        """A GET of SerpAPI's search endpoint for `engine` (``None`` parameters left out)."""
        return HTTPRequest.build(
            "GET",
            self.endpoint,
            params={"engine": engine, **params, "api_key": self._api_key},
            secrets=[self._api_key],
            service=SERVICE,
        )

    async def _get(self, engine: str, params: Mapping[str, _Param]) -> JSONValue:
        return await self._fetch_json(self.build_request(engine, params))

    async def _search(self, params: Mapping[str, _Param]) -> dict[str, list[JSONValue]]:
        return parse_scholar_results(await self._get("google_scholar", params))

    async def _author(self, params: Mapping[str, _Param]) -> dict[str, JSONValue]:
        return parse_author(await self._get("google_scholar_author", params))

    async def _citation(self, params: Mapping[str, _Param]) -> dict[str, JSONValue]:
        return parse_citation(await self._get("google_scholar_cite", params))

    async def _author_id(self, params: Mapping[str, _Param]) -> dict[str, str]:
        return parse_author_id(await self._get("google_scholar_profiles", params))


class GoogleScholar(_GoogleScholarCore, BaseAction):
    """Google Scholar through SerpAPI: find papers, their citations and their authors.

    Args:
        api_key: A SerpAPI key (else ``$SERPAPI_API_KEY``).
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        endpoint: SerpAPI's search endpoint.
        **options: `WebToolOptions`: ``timeout`` (20 s per attempt), ``max_retry`` (3 attempts),
            ``cache_ttl`` (answers reused for 600 s).
    """

    @tool_api(explode_return=True)
    def search_google_scholar(
        self,
        query: str,
        cites: Optional[str] = None,
        as_ylo: Optional[int] = None,
        as_yhi: Optional[int] = None,
        scisbd: Optional[int] = None,
        cluster: Optional[str] = None,
        hl: Optional[str] = None,
        lr: Optional[str] = None,
        start: Optional[int] = None,
        num: Optional[int] = None,
        as_sdt: Optional[str] = None,
        safe: Optional[str] = None,
        filter: Optional[str] = None,
        as_vis: Optional[str] = None,
    ) -> dict[str, list[JSONValue]] | ActionReturn:
        """Search Google Scholar for papers; returns the top 3 with their ids, citation counts and snippets.

        Args:
            query (str): what to search for
            cites (Optional[str]): list the papers citing the paper with this id instead
            as_ylo (Optional[int]): earliest publication year
            as_yhi (Optional[int]): latest publication year
            scisbd (Optional[int]): 1 or 2: only papers added in the past year, newest first (2 adds citations)
            cluster (Optional[str]): list every version of the paper with this cluster id instead
            hl (Optional[str]): interface language code, e.g. "en"
            lr (Optional[str]): restrict to languages, e.g. "lang_en|lang_fr"
            start (Optional[int]): offset of the first result (0, 10, 20, ...)
            num (Optional[int]): how many results to ask for (at most 20)
            as_sdt (Optional[str]): search type or filter, e.g. "7" to include patents
            safe (Optional[str]): "active" to filter adult content
            filter (Optional[str]): "0" to turn the similar/omitted results filters off
            as_vis (Optional[str]): "1" to leave citations out

        Returns:
            dict: the top papers, as parallel lists
                - title: paper titles
                - cited_by: citation counts
                - organic_id: result ids (for get_citation_format)
                - snippets: text snippets
                - pub_info: authors, venue and year
        """
        params = dict(locals())
        params.pop("self")
        return self.run_io(as_data(self._search(_scholar_params(params))))

    @tool_api(explode_return=True)
    def get_author_information(
        self,
        author_id: str,
        hl: Optional[str] = None,
        view_op: Optional[str] = None,
        sort: Optional[str] = None,
        citation_id: Optional[str] = None,
        start: Optional[int] = None,
        num: Optional[int] = None,
    ) -> dict[str, JSONValue] | ActionReturn:
        """Profile of a Google Scholar author (use get_author_id to find the id).

        Args:
            author_id (str): the author's Google Scholar id
            hl (Optional[str]): interface language code, e.g. "en"
            view_op (Optional[str]): a part of the profile to show, e.g. "view_citation"
            sort (Optional[str]): article order: "title" or "pubdate" (default: by citations)
            citation_id (Optional[str]): show one article of the profile
            start (Optional[int]): offset of the first article
            num (Optional[int]): how many articles to ask for (at most 100)

        Returns:
            dict: the author's profile
                * name: the author's name
                * affiliations: where the author works
                * website: the author's homepage
                * interests: research interests
                * cited_by: citation metrics (citations, h_index, i10_index)
                * articles: up to 3 of the author's articles
        """
        params = dict(locals())
        params.pop("self")
        return self.run_io(as_data(self._author(params)))

    @tool_api(explode_return=True)
    def get_citation_format(self, q: str) -> dict[str, JSONValue] | ActionReturn:
        """How to cite a paper found by search_google_scholar (MLA, plus every other style offered).

        Args:
            q (str): the organic_id of a search_google_scholar result

        Returns:
            dict: the citation
                * citation: the MLA citation
                * formats: the citation in each style (MLA, APA, Chicago, ...)
        """
        return self.run_io(as_data(self._citation({"q": q})))

    @tool_api(explode_return=True)
    def get_author_id(
        self,
        mauthors: str,
        hl: Optional[str] = "en",
        after_author: Optional[str] = None,
        before_author: Optional[str] = None,
    ) -> dict[str, str] | ActionReturn:
        """Find the Google Scholar id of an author by name.

        Args:
            mauthors (str): the author's name
            hl (Optional[str]): interface language code, e.g. "en"
            after_author (Optional[str]): token of the next page of profiles
            before_author (Optional[str]): token of the previous page of profiles

        Returns:
            dict: the first matching profile
                * author_id: the author's Google Scholar id
        """
        params = dict(locals())
        params.pop("self")
        return self.run_io(as_data(self._author_id(params)))


def _scholar_params(params: Mapping[str, _Param]) -> dict[str, _Param]:
    params = dict(params)
    params["q"] = params.pop("query")
    return params


def _full_args(method: Callable[..., object], params: Mapping[str, _Param]) -> dict[str, _Param]:
    """`params` completed with the defaults of the sync API `method` (so both twins send the same request)."""
    bound = inspect.signature(method).bind(None, **params)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    return arguments


class AsyncGoogleScholar(AsyncActionMixin, _GoogleScholarCore, sibling_of=GoogleScholar):
    """Google Scholar through SerpAPI: find papers, their citations and their authors."""

    # The descriptions (and so the accepted arguments) are those of GoogleScholar's APIs.
    async def search_google_scholar(self, **params: _Param) -> dict[str, list[JSONValue]] | ActionReturn:  # noqa: D102
        return await as_data(self._search(_scholar_params(_full_args(GoogleScholar.search_google_scholar, params))))

    async def get_author_information(self, **params: _Param) -> dict[str, JSONValue] | ActionReturn:  # noqa: D102
        return await as_data(self._author(_full_args(GoogleScholar.get_author_information, params)))

    async def get_citation_format(self, q: str) -> dict[str, JSONValue] | ActionReturn:  # noqa: D102
        return await as_data(self._citation({"q": q}))

    async def get_author_id(self, **params: _Param) -> dict[str, str] | ActionReturn:  # noqa: D102
        return await as_data(self._author_id(_full_args(GoogleScholar.get_author_id, params)))
