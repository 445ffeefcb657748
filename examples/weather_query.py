"""Seed 002's WeatherQuery tool (QWeather API) used by a function-calling agent.

Needs ``WEATHER_API_KEY``. Usage: ``python examples/weather_query.py 北京``
"""

from __future__ import annotations

import os
import sys
from typing import Any

import requests
from common import make_llm

from plait.actions.base_action import BaseAction, tool_api
from plait.actions.parser import BaseParser, JsonParser
from plait.agents import FunctionCallingAgent
from plait.schema import ActionReturn, ActionStatusCode


class WeatherQuery(BaseAction):
    """Weather plugin for querying weather information."""

    def __init__(
        self,
        key: str | None = None,
        description: dict[str, Any] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        location_query_url: str = "https://geoapi.qweather.com/v2/city/lookup",
        weather_query_url: str = "https://devapi.qweather.com/v7/weather/now",
    ) -> None:
        super().__init__(description, parser, enable)
        key = os.environ.get("WEATHER_API_KEY", key)
        if key is None:
            raise ValueError(
                "Please set Weather API key either in the environment as WEATHER_API_KEY or pass it as `key`"
            )
        self.key = key
        self.location_query_url = location_query_url
        self.weather_query_url = weather_query_url

    @tool_api
    def run(self, query: str) -> ActionReturn:
        """Query the current weather of a city.

        Args:
            query: The city name to query.
        """
        tool_return = ActionReturn(type=self.name)
        try:
            city = requests.get(self.location_query_url, params={"key": self.key, "location": query}, timeout=10)
            if city.status_code != 200:
                tool_return.errmsg, tool_return.state = str(city.status_code), ActionStatusCode.API_ERROR
                return tool_return
            locations = city.json().get("location") or []
            if not locations:
                tool_return.errmsg, tool_return.state = f"no city named {query!r}", ActionStatusCode.HTTP_ERROR
                return tool_return
            weather = requests.get(
                self.weather_query_url, params={"key": self.key, "location": locations[0]["id"]}, timeout=10
            )
        except requests.RequestException as exc:
            tool_return.errmsg, tool_return.state = str(exc), ActionStatusCode.HTTP_ERROR
            return tool_return
        if weather.status_code != 200:
            tool_return.errmsg, tool_return.state = str(weather.status_code), ActionStatusCode.API_ERROR
            return tool_return
        now = weather.json()["now"]
        text = f"{now['text']}, {now['temp']}°C (feels like {now['feelsLike']}°C), humidity {now['humidity']}%"
        tool_return.result = [{"type": "text", "content": text}]
        return tool_return


def main(city: str, llm: Any = None, tool: WeatherQuery | None = None) -> str:
    agent = FunctionCallingAgent(
        llm or make_llm(temperature=0.0), [tool or WeatherQuery()], "Answer weather questions."
    )
    reply = agent(f"What is the weather in {city} right now?")
    sys.stdout.write(f"{reply.content}\n")
    return str(reply.content)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "Beijing")
