"""Seed 002's weather web demo: the web demo with its `WeatherQuery` plugin offered and selected.

```
export WEATHER_API_KEY=...        # a QWeather key (https://dev.qweather.com)
streamlit run examples/internlm2_weather_web_demo.py --server.address 127.0.0.1 --server.port 7860
```

The tool is the one written in seed 002 (``examples/weather_query.py``); any module of your
own works the same way: ``plait web --tools-from my_tools.py``.
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("PLAIT_WEB_AGENT", "internlm2")
os.environ.setdefault("PLAIT_WEB_TOOLS", "WeatherQuery")
os.environ.setdefault("PLAIT_WEB_TOOL_MODULES", os.path.join(_HERE, "weather_query.py"))

from plait.web.app import main  # noqa: E402  (reads the preset above)

main()
