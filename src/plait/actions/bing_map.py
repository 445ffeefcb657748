"""`BINGMap` / `AsyncBINGMap`: distances, routes, coordinates and nearby places (Bing Maps REST).

Every parameter is URL-encoded (place names with spaces, ``&`` or non-ASCII text are safe);
an explicit ``key`` wins over ``$BING_MAP_KEY``; the key is redacted from every error. The
base URL is configurable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

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

__all__ = ["AsyncBINGMap", "BINGMap", "first_resource", "parse_places", "parse_route"]

SERVICE = "Bing Maps"

_Start = Annotated[str, "where the trip starts (a place name or an address)"]
_End = Annotated[str, "where the trip ends (a place name or an address)"]


def resources(data: object) -> list[Mapping[str, JSONValue]]:
    """``resourceSets[0].resources`` of a Bing Maps answer.

    Raises:
        APIResponseError: The answer reports an error.
    """
    body = as_dict(data)
    status = body.get("statusCode", 200)
    if (isinstance(status, int) and status >= 400) or body.get("errorDetails"):
        details = "; ".join(map(str, as_list(body.get("errorDetails")))) or str(body.get("statusDescription", ""))
        raise APIResponseError(f"Bing Maps reported an error: {details}")
    sets = as_list(body.get("resourceSets"))
    return [as_dict(r) for r in as_list(as_dict(sets[0]).get("resources"))] if sets else []


def first_resource(data: object, what: str) -> Mapping[str, JSONValue]:
    """The first resource; `what` names the thing looked for in the error when there is none."""
    found = resources(data)
    if not found:
        raise APIResponseError(f"Bing Maps found no {what}")
    return found[0]


def parse_route(data: object) -> dict[str, JSONValue]:
    """Distance, duration and the instruction texts of the first route."""
    route = first_resource(data, "route between these places")
    steps = [
        str(as_dict(item.get("instruction")).get("text", ""))
        for leg in map(as_dict, as_list(route.get("routeLegs")))
        for item in map(as_dict, as_list(leg.get("itineraryItems")))
        if as_dict(item.get("instruction")).get("text")
    ]
    return {
        "distance": route.get("travelDistance"),
        "distance_unit": route.get("distanceUnit", "Kilometer"),
        "duration": route.get("travelDuration"),
        "duration_unit": route.get("durationUnit", "Second"),
        "route": steps,
    }


def parse_places(data: object, limit: int = 5) -> list[dict[str, str]]:
    """Name and address of the first `limit` places of a LocalSearch answer."""
    places = []
    for item in resources(data)[:limit]:
        address = as_dict(item.get("Address") or item.get("address"))
        places.append({"name": str(item.get("name", "")), "address": str(address.get("formattedAddress", ""))})
    return places


class _BINGMapCore(WebToolMixin, ActionCore, register=False):
    """What `BINGMap` and `AsyncBINGMap` share (the arguments are `BINGMap`'s)."""

    def __init__(
        self,
        key: str | None = None,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        base_url: str = "https://dev.virtualearth.net/REST/v1",
        **options: Unpack[WebToolOptions],
    ) -> None:
        super().__init__(description, parser, enable)
        self._key = require(env_or(key, "BING_MAP_KEY"), "BINGMap's Bing Maps key (key=)", "BING_MAP_KEY")
        self.base_url = base_url.rstrip("/")
        self.client = self._client_for(options)

    def build_request(self, path: str, params: Mapping[str, object]) -> HTTPRequest:
        """A GET of ``{base_url}/{path}`` with every parameter URL-encoded and the key last."""
        return HTTPRequest.build(
            "GET",
            f"{self.base_url}/{path}",
            params={**params, "key": self._key},
            secrets=[self._key],
            service=SERVICE,
        )

    async def _get(self, path: str, params: Mapping[str, object]) -> JSONValue:
        return await self._fetch_json(self.build_request(path, params))

    async def _route(self, start: str, end: str) -> dict[str, JSONValue]:
        return parse_route(await self._get("Routes/Driving", {"wp.0": start, "wp.1": end, "o": "json"}))

    async def _distance(self, start: str, end: str) -> dict[str, JSONValue]:
        route = await self._route(start, end)
        return {"distance": route["distance"]}

    async def _steps(self, start: str, end: str) -> dict[str, JSONValue]:
        route = await self._route(start, end)
        return {"route": route["route"]}

    async def _coordinates(self, location: str) -> dict[str, float]:
        found = first_resource(await self._get("Locations", {"query": location}), f"location matching {location!r}")
        coordinates = as_list(as_dict(found.get("point")).get("coordinates"))
        if len(coordinates) < 2:
            raise APIResponseError(f"Bing Maps returned no coordinates for {location!r}")
        latitude, longitude = coordinates[0], coordinates[1]
        if not isinstance(latitude, (int, float, str)) or not isinstance(longitude, (int, float, str)):
            raise APIResponseError(f"Bing Maps returned no coordinates for {location!r}")
        return {"latitude": float(latitude), "longitude": float(longitude)}

    async def _nearby(
        self, search_term: str, places: str, latitude: float, longitude: float, radius: int
    ) -> dict[str, list[dict[str, str]]]:
        if places and places != "unknown":
            point = await self._coordinates(places)
            latitude, longitude = point["latitude"], point["longitude"]
        params = {"query": search_term, "userCircularMapView": f"{latitude},{longitude},{int(radius)}", "maxResults": 5}
        return {"places": parse_places(await self._get("LocalSearch/", params))}


class BINGMap(_BINGMapCore, BaseAction):
    """Maps: coordinates of places, driving distances and routes, and places nearby (Bing Maps).

    Args:
        key: The Bing Maps key (else ``$BING_MAP_KEY``).
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        base_url: The REST API base URL.
        **options: `WebToolOptions`: ``timeout`` (10 s per attempt), ``max_retry`` (3 attempts),
            ``cache_ttl`` (answers reused for 600 s).
    """

    @tool_api(explode_return=True)
    def get_distance(self, start: _Start, end: _End) -> dict[str, JSONValue] | ActionReturn:
        """Driving distance between two places, in kilometres.

        Returns:
            dict: the distance
                * distance (float): driving distance in km
        """
        return self.run_io(as_data(self._distance(start, end)))

    @tool_api(explode_return=True)
    def get_route(self, start: _Start, end: _End) -> dict[str, JSONValue] | ActionReturn:
        """Turn-by-turn driving directions between two places.

        Returns:
            dict: the directions
                * route (list): the driving instructions, in order
        """
        return self.run_io(as_data(self._steps(start, end)))

    @tool_api(explode_return=True)
    def get_coordinates(self, location: str) -> dict[str, float] | ActionReturn:
        """Latitude and longitude of a place.

        Args:
            location (str): a place name or an address

        Returns:
            dict: the coordinates
                * latitude (float): latitude in degrees
                * longitude (float): longitude in degrees
        """
        return self.run_io(as_data(self._coordinates(location)))

    @tool_api(explode_return=True)
    def search_nearby(
        self,
        search_term: str,
        places: str = "unknown",
        latitude: float = 0.0,
        longitude: float = 0.0,
        radius: int = 5000,
    ) -> dict[str, list[dict[str, str]]] | ActionReturn:
        """Find places of some kind (cafes, hotels, museums...) around a named place or around coordinates.

        Args:
            search_term (str): what to look for, e.g. "coffee shop"
            places (str): the place to search around; keep "unknown" to search around latitude/longitude instead
            latitude (float): latitude of the search centre, used when places is "unknown"
            longitude (float): longitude of the search centre, used when places is "unknown"
            radius (int): search radius in metres

        Returns:
            dict: what was found
                * places (list): up to 5 places, each with its name and address
        """
        return self.run_io(as_data(self._nearby(search_term, places, latitude, longitude, radius)))


class AsyncBINGMap(AsyncActionMixin, _BINGMapCore, sibling_of=BINGMap):
    """Maps: coordinates of places, driving distances and routes, and places nearby (Bing Maps)."""

    async def get_distance(self, start: str, end: str) -> dict[str, JSONValue] | ActionReturn:  # noqa: D102
        return await as_data(self._distance(start, end))

    async def get_route(self, start: str, end: str) -> dict[str, JSONValue] | ActionReturn:  # noqa: D102
        return await as_data(self._steps(start, end))

    async def get_coordinates(self, location: str) -> dict[str, float] | ActionReturn:  # noqa: D102
        return await as_data(self._coordinates(location))

    async def search_nearby(  # noqa: D102
        self,
        search_term: str,
        places: str = "unknown",
        latitude: float = 0.0,
        longitude: float = 0.0,
        radius: int = 5000,
    ) -> dict[str, list[dict[str, str]]] | ActionReturn:
        return await as_data(self._nearby(search_term, places, latitude, longitude, radius))
