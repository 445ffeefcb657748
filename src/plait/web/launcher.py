"""Starting the web demo: the streamlit command line and the environment that presets the sidebar."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from typing_extensions import TypedDict, Unpack

from ..exceptions import MissingDependencyError

__all__ = ["APP_PATH", "launch", "streamlit_command", "web_environment"]

#: The streamlit script (``streamlit run`` takes this path).
APP_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.py")


def streamlit_command(host: str = "127.0.0.1", port: int = 8501, python: str | None = None) -> list[str]:
    """The command that serves the app on ``host:port``.

    Headless, without usage statistics, file watcher or deploy button.
    """
    return [
        python or sys.executable,
        "-m",
        "streamlit",
        "run",
        APP_PATH,
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "minimal",
    ]


class _Presets(TypedDict, total=False):
    """The keyword arguments of `web_environment` that `launch` passes on."""

    base: Mapping[str, str] | None
    api_base: str | None
    model: str | None
    agent: str | None
    tools: str | None
    tool_modules: Sequence[str]
    work_dir: str | None
    mcp: Sequence[str]


def web_environment(
    base: Mapping[str, str] | None = None,
    *,
    api_base: str | None = None,
    model: str | None = None,
    agent: str | None = None,
    tools: str | None = None,
    tool_modules: Sequence[str] = (),
    work_dir: str | None = None,
    mcp: Sequence[str] = (),
) -> dict[str, str]:
    """`base` (default: this process's environment) plus the ``PLAIT_WEB_*`` variables the app reads.

    Args:
        base: The environment to extend.
        api_base: Preselect this OpenAI-compatible server (else the embedded model).
        model: The model name on the server, or a catalogue name or ``.gguf`` path for the embedded model.
        agent: The agent type selected at start (``function_calling``, ``internlm2``, ``react``).
        tools: Comma-separated plugins selected at start.
        tool_modules: Modules or ``.py`` files whose tools should be offered.
        work_dir: Where session folders (uploads, images) are kept.
        mcp: MCP servers offered at start (command lines or URLs).
    """
    env = dict(os.environ if base is None else base)
    values = {
        "PLAIT_WEB_API_BASE": api_base,
        "PLAIT_WEB_MODEL": model,
        "PLAIT_WEB_AGENT": agent,
        "PLAIT_WEB_TOOLS": tools,
        "PLAIT_WEB_WORK_DIR": os.path.abspath(work_dir) if work_dir else None,
        "PLAIT_WEB_MCP": "\n".join(mcp) or None,
        "PLAIT_WEB_TOOL_MODULES": os.pathsep.join(os.path.abspath(m) if m.endswith(".py") else m for m in tool_modules)
        or None,
    }
    env.update({key: value for key, value in values.items() if value is not None})
    return env


def launch(host: str = "127.0.0.1", port: int = 8501, **presets: Unpack[_Presets]) -> int:
    """Serve the app until interrupted (on POSIX this process becomes the streamlit server).

    Returns streamlit's exit status where the process cannot be replaced (Windows).

    Args:
        host: The address to listen on.
        port: The port to listen on.
        **presets: The sidebar's starting values, as `web_environment` takes them.

    Raises:
        MissingDependencyError: streamlit is not installed (the ``web`` extra).
    """
    if importlib.util.find_spec("streamlit") is None:
        raise MissingDependencyError("streamlit", extra="web", feature="plait web")
    env = web_environment(**presets)
    command = streamlit_command(host, port)
    if os.name == "posix":  # become streamlit: a signal to `plait web` reaches the server, no orphan is left
        os.execve(command[0], command, env)
    return subprocess.call(command, env=env)
