"""What the sidebar chooses: the `Settings` of one conversation, their defaults, and the plugin list.

Everything here is plain Python (no streamlit), so the choices can be tested directly.
Defaults can be preset from the environment, which is how ``plait web --api-base ...``
passes its options to the app:

| variable | meaning |
|---|---|
| ``PLAIT_WEB_API_BASE`` | preselect "OpenAI-compatible server" with this base URL |
| ``PLAIT_WEB_MODEL`` | the model name on the server (or a catalogue name or ``.gguf`` path for the embedded model) |
| ``PLAIT_WEB_AGENT`` | ``function_calling`` (default), ``internlm2`` or ``react`` |
| ``PLAIT_WEB_TOOLS`` | comma-separated plugins selected at start (default ``Calculator``) |
| ``PLAIT_WEB_TOOL_MODULES`` | ``os.pathsep``-separated modules or ``.py`` files defining extra tools |
| ``PLAIT_WEB_MCP`` | MCP servers offered at start, one per line (a command line or an http(s) URL) |

Without ``PLAIT_WEB_API_BASE`` / ``PLAIT_WEB_MODEL``, the variables the CLI reads are used:
``PLAIT_API_BASE`` (else ``OPENAI_BASE_URL``) and ``PLAIT_MODEL``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from typing_extensions import TypedDict

from ..utils.loading import import_source

__all__ = [
    "AGENT_KINDS",
    "INTERPRETER_TOOL",
    "Preset",
    "Settings",
    "default_prompts",
    "import_tool_modules",
    "plugin_choices",
    "preset",
    "server_url",
]

#: Agent types offered by the sidebar: key -> label.
AGENT_KINDS: Mapping[str, str] = {
    "function_calling": "Native function calling (FunctionCallingAgent)",
    "internlm2": "InternLM2 protocol (Internlm2Agent)",
    "react": "ReAct (text protocol)",
}
#: The tool behind the code-interpreter toggle.
INTERPRETER_TOOL = "IPythonInterpreter"
#: Registered classes that are not plugins a user picks (the interpreter has its own toggle).
_NOT_PLUGINS = frozenset({INTERPRETER_TOOL})  # the interpreter has its own switch


@dataclass(frozen=True)
class Settings:
    """One conversation's configuration (hashable: a change means the agent is rebuilt).

    Attributes:
        api_base: Base URL of an OpenAI-compatible server; empty for the embedded model.
        model: The model name on the server, or a catalogue name (``plait models``) or ``.gguf``
            path for the embedded model (empty: the default embedded model).
        api_key: The server's API key (empty: ``$OPENAI_API_KEY`` when set, else none).
        agent: A key of `AGENT_KINDS`.
        plugins: Registry names of the selected tools.
        interpreter: Whether the code interpreter is available.
        mcp_servers: MCP servers whose tools are added (command lines or http(s) URLs).
        system_prompt: The system prompt (for ReAct: its template, with placeholders).
        plugin_prompt: The InternLM2 plugin prompt (``{prompt}``, ``{begin}``, ``{end}``).
        interpreter_prompt: The InternLM2 interpreter prompt (``{begin}``, ``{end}``).
        max_turn: Tool rounds (model replies for InternLM2 / ReAct) per answer.
        max_new_tokens: Longest model reply, in tokens.
        temperature: Sampling temperature.
    """

    api_base: str = ""
    model: str = ""
    api_key: str = ""
    agent: str = "function_calling"
    plugins: tuple[str, ...] = ("Calculator",)
    interpreter: bool = False
    mcp_servers: tuple[str, ...] = ()
    system_prompt: str = ""
    plugin_prompt: str = ""
    interpreter_prompt: str = ""
    max_turn: int = 4
    max_new_tokens: int = 512
    temperature: float = 0.0

    def model_key(self) -> tuple[str, str, str, int, float]:
        """What the model object depends on (the model is rebuilt only when this changes)."""
        return (self.api_base, self.model, self.api_key, self.max_new_tokens, self.temperature)


def default_prompts(agent: str, language: str = "en") -> dict[str, str]:
    """The default ``system`` / ``plugin`` / ``interpreter`` prompts of an agent type.

    Only the InternLM2 agent has plugin and interpreter prompts (the others describe tools
    through native tool schemas or their own template); theirs are empty.

    Args:
        agent: A key of `AGENT_KINDS`.
        language: ``'en'`` or ``'cn'``.
    """
    cn = language == "cn"
    if agent == "internlm2":
        from ..agents.stream import INTERPRETER_CN, INTERPRETER_EN, META_CN, META_EN, PLUGIN_CN, PLUGIN_EN

        return {
            "system": META_CN if cn else META_EN,
            "plugin": PLUGIN_CN if cn else PLUGIN_EN,
            "interpreter": INTERPRETER_CN if cn else INTERPRETER_EN,
        }
    if agent == "react":
        from ..prompts.react_prompts import REACT_TEXT_PROMPT_CN, REACT_TEXT_PROMPT_EN

        return {"system": REACT_TEXT_PROMPT_CN if cn else REACT_TEXT_PROMPT_EN, "plugin": "", "interpreter": ""}
    from ..cli import DEFAULT_SYSTEM

    system = "你是一个乐于助人的助手。需要精确计算或外部信息时，请调用工具，再根据工具的结果简洁地回答用户。"
    return {"system": system if cn else DEFAULT_SYSTEM, "plugin": "", "interpreter": ""}


def plugin_choices() -> list[str]:
    """Registry tools a user can pick as plugins: synchronous, concrete, not the interpreter.

    User tools (any `BaseAction` subclass imported so far, e.g. by `import_tool_modules`)
    are included, after plait's own.
    """
    from ..actions._registry import user_tools

    return [name for name in user_tools() if name not in _NOT_PLUGINS]


def import_tool_modules(specs: str) -> list[str]:
    """Import modules (dotted names or ``.py`` paths, `os.pathsep`- or comma-separated) so their tools register.

    Each module is imported once per process; a file's folder joins `sys.path` so it can
    import its neighbours. Returns one readable message per module that failed to import
    (the others are imported regardless).
    """
    problems: list[str] = []
    for spec in (part.strip() for chunk in specs.split(os.pathsep) for part in chunk.split(",")):
        if not spec:
            continue
        try:
            import_source(spec)
        except Exception as exc:  # user code: whatever it raises is reported, the other modules still load
            problems.append(f"could not import tool module {spec!r}: {type(exc).__name__}: {exc}")
    return problems


def server_url(text: str) -> str:
    """The base URL typed into the sidebar, made whole.

    Seeds 001/002 type the server's address without a scheme (``127.0.0.1:23333``): such
    an address gets ``http://``. Empty stays empty (the embedded model).
    """
    text = text.strip()
    if text and "://" not in text:
        return f"http://{text}"
    return text


class Preset(TypedDict):
    """The sidebar's starting values (see `preset`)."""

    api_base: str
    model: str
    agent: str
    plugins: list[str]
    mcp: str


def _first(env: Mapping[str, str], *names: str) -> str:
    """The first of the variables `names` that is set and not empty ('' if none)."""
    return next((env[name] for name in names if env.get(name)), "")


def preset(environ: Mapping[str, str] | None = None) -> Preset:
    """Initial sidebar values from the environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    agent = env.get("PLAIT_WEB_AGENT", "function_calling")
    tools = env.get("PLAIT_WEB_TOOLS", "Calculator")
    return {
        "api_base": server_url(_first(env, "PLAIT_WEB_API_BASE", "PLAIT_API_BASE", "OPENAI_BASE_URL")),
        "model": _first(env, "PLAIT_WEB_MODEL", "PLAIT_MODEL"),
        "agent": agent if agent in AGENT_KINDS else "function_calling",
        "plugins": [t.strip() for t in tools.split(",") if t.strip()],
        "mcp": env.get("PLAIT_WEB_MCP", ""),
    }
