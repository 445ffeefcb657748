"""BINGMap against a fake Bing Maps REST server replaying the documented answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _web_support import SECRET, call, content, fixture_json, make

from plait.actions.bing_map import AsyncBINGMap, BINGMap
from plait.exceptions import UserError
from plait.schema import ActionStatusCode
from plait.testing.fake_http import Canned, FakeHTTPServer

AUTH_ERROR = {
    "authenticationResultCode": "InvalidCredentials",
    "errorDetails": ["Access was denied. You may have entered your credentials incorrectly."],
    "resourceSets": [],
    "statusCode": 401,
    "statusDescription": "Unauthorized",
}


@pytest.fixture
def server() -> Iterator[FakeHTTPServer]:
    with FakeHTTPServer() as srv:
        srv.route("GET", "/REST/v1/Routes/Driving", Canned.json(fixture_json("bingmaps_routes_driving.json")))
        srv.route("GET", "/REST/v1/Locations", Canned.json(fixture_json("bingmaps_locations_query.json")))
        srv.route("GET", "/REST/v1/LocalSearch/", Canned.json(fixture_json("bingmaps_local_search.json")))
        yield srv


def maps(mode: str, server: FakeHTTPServer, **kwargs: object) -> BINGMap:
    return make(mode, BINGMap, AsyncBINGMap, key=SECRET, base_url=server.url("/REST/v1"), max_retry=1, **kwargs)  # type: ignore[no-any-return]


def test_distance_route_coordinates(mode: str, server: FakeHTTPServer) -> None:
    tool = maps(mode, server)
    assert content(call(tool, {"start": "Redmond, WA", "end": "Issaquah & Co, WA"}, "get_distance")) == {
        "distance": 28.803
    }
    sent = server.requests_to("/REST/v1/Routes/Driving")[0]
    assert sent.query == {"wp.0": ["Redmond, WA"], "wp.1": ["Issaquah & Co, WA"], "o": ["json"], "key": [SECRET]}
    route = content(call(tool, {"start": "redmond,wa", "end": "Issaquah,wa"}, "get_route"))["route"]
    assert route == [
        "Depart NE 85th St toward 154th Ave NE",
        "Turn left onto 154th Ave NE",
        "Keep straight onto W Lake Sammamish Pkwy NE",
        "Arrive at Issaquah, WA",
    ]
    assert content(call(tool, {"location": "Tower of London"}, "get_coordinates")) == {
        "latitude": 51.509521484375, "longitude": -0.0763700008392334,
    }  # fmt: skip
    assert server.requests_to("/REST/v1/Locations")[0].param("query") == "Tower of London"


def test_search_nearby_by_place_name_and_by_coordinates(mode: str, server: FakeHTTPServer) -> None:
    tool = maps(mode, server)
    found = content(call(tool, {"search_term": "coffee", "places": "Tower of London", "radius": 1000}, "search_nearby"))
    assert found["places"][0] == {"name": "Starbucks", "address": "823 1st Ave, Seattle, WA, 98104"}
    assert len(found["places"]) == 4
    sent = server.requests_to("/REST/v1/LocalSearch/")[0]
    assert sent.param("userCircularMapView") == "51.509521484375,-0.0763700008392334,1000"
    call(tool, {"search_term": "coffee", "latitude": 47.6, "longitude": -122.3}, "search_nearby")
    assert server.requests_to("/REST/v1/LocalSearch/")[1].param("userCircularMapView") == "47.6,-122.3,5000"
    assert len(server.requests_to("/REST/v1/Locations")) == 1


def test_errors(mode: str, server: FakeHTTPServer) -> None:
    server.route("GET", "/REST/v1/Locations", [
        Canned.json(AUTH_ERROR, status=401),
        Canned.json({"resourceSets": [{"estimatedTotal": 0, "resources": []}], "statusCode": 200}),
        Canned.json({}, delay=60),
    ])  # fmt: skip
    tool = maps(mode, server, cache_ttl=0, timeout=2.0)  # the answers before the last need far less
    ret = call(tool, {"location": "x"}, "get_coordinates")
    assert ret.state == ActionStatusCode.HTTP_ERROR
    assert "Bing Maps answered HTTP 401 Unauthorized: Access was denied" in ret.errmsg
    assert SECRET not in ret.errmsg
    ret = call(tool, {"location": "Atlantis"}, "get_coordinates")
    assert ret.state == ActionStatusCode.API_ERROR and "found no location matching 'Atlantis'" in ret.errmsg
    ret = call(tool, {"location": "x"}, "get_coordinates")
    assert ret.state == ActionStatusCode.HTTP_ERROR and "did not answer within" in ret.errmsg
    ret = call(tool, {"search_term": "coffee", "places": "x"}, "search_nearby")  # the lookup fails: reported as such
    assert ret.state == ActionStatusCode.HTTP_ERROR


def test_explicit_key_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BING_MAP_KEY", "env-key")
    assert dict(BINGMap().build_request("Locations", {}).params)["key"] == "env-key"
    assert dict(BINGMap(key="explicit").build_request("Locations", {}).params)["key"] == "explicit"
    monkeypatch.delenv("BING_MAP_KEY")
    with pytest.raises(UserError, match="BING_MAP_KEY"):
        BINGMap()
    apis = [api["name"] for api in BINGMap(key="k").description["api_list"]]
    assert apis == ["get_distance", "get_route", "get_coordinates", "search_nearby"]
