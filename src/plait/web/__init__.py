"""plait's web demo: a streamlit chat app over plait's agents (``plait web``).

The app lives in `plait.web.app` (run by streamlit); this package's other modules are
plain Python: `settings` (what the sidebar chooses), `events` (what an answer streams and
how the transcript is built), `runner` (building and running agents), `session` (one
browser session's state). Importing this package does not import streamlit.

Needs the ``web`` extra: ``pip install 'plait[web]'``.
"""

from __future__ import annotations

from .launcher import APP_PATH, launch, streamlit_command

__all__ = ["APP_PATH", "launch", "streamlit_command"]
