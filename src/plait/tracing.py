"""Tracing: OpenTelemetry spans after the GenAI semantic conventions, or a local JSON-lines trace.

```python
from plait.tracing import instrument, uninstrument

instrument()                 # every agent of the process, created before or after
agent("What is 37 * 91?", session_id="u1")
# invoke_agent FunctionCallingAgent
# ├── chat gpt-4o-mini         gen_ai.usage.input_tokens=192, gen_ai.response.finish_reasons=['tool_calls']
# ├── execute_tool Calculator  gen_ai.tool.call.id='call_1'
# └── chat gpt-4o-mini
uninstrument()
```

`instrument` sends to the global tracer provider (or the one given) whatever exporter you
configured: Langfuse, Phoenix, Logfire, Grafana Tempo, Jaeger... Spans nest by the call tree
(an agent's model and tool calls, then the sub-agents they call) across threads and asyncio
tasks, and sit under the span the caller has current. Messages, tool arguments and results
are recorded only with ``record_content=True`` (secrets masked). Needs the ``otel`` extra
(``pip install 'plait[otel]'``); `JSONLTracer` (here too) is the zero-dependency local trace.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from .hooks.tracer import JSONLTracer
from .llms._optional import import_optional

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

    from .hooks._genai import GenAISpans
    from .hooks.hook import RemovableHandle

__all__ = ["JSONLTracer", "current_span", "instrument", "is_instrumented", "uninstrument"]

_lock = threading.Lock()
_installed: tuple[GenAISpans, RemovableHandle] | None = None


def instrument(tracer_provider: TracerProvider | None = None, *, record_content: bool = False) -> None:
    """Emit OpenTelemetry spans for every agent call, model request and tool call of the process.

    Calling it again replaces the earlier instrumentation (another provider or content setting).

    Args:
        tracer_provider: Where the spans go; the global provider (``trace.set_tracer_provider``) when None.
        record_content: Also record the messages (``gen_ai.input.messages`` /
            ``gen_ai.output.messages``) and tool arguments and results; off by default, as they
            may hold personal data. Secrets in them are masked either way.

    Raises:
        MissingDependencyError: ``opentelemetry-api`` is not installed (``pip install 'plait[otel]'``).
    """
    global _installed
    import_optional("opentelemetry.trace", extra="otel", feature="plait.tracing.instrument")
    from opentelemetry import trace

    from . import __version__
    from .hooks._genai import GenAISpans
    from .interceptors import register_global_interceptor

    tracer = trace.get_tracer("plait", __version__, tracer_provider=tracer_provider)
    spans = GenAISpans(tracer, record_content=record_content)
    with _lock:
        if _installed is not None:
            _installed[1].remove()
        _installed = (spans, register_global_interceptor(spans))


def uninstrument() -> None:
    """Stop emitting spans (spans already open still end); does nothing when not instrumented."""
    global _installed
    with _lock:
        if _installed is not None:
            _installed[1].remove()
            _installed = None


def is_instrumented() -> bool:
    """Whether `instrument` is in effect."""
    return _installed is not None


def current_span() -> Span | None:
    """The innermost plait span open here (a tool's ``execute_tool`` span inside the tool), else None.

    Use it to add attributes or events from your own code, or as the explicit parent of
    spans you start (``trace.set_span_in_context(current_span())``).
    """
    installed = _installed
    return None if installed is None else installed[0].current_span()
