"""Keeping requests within the model's context window: `ContextPolicy`, an interceptor on model calls.

The stored history is never changed: a policy shapes what one request *sends*, where every
paradigm's request passes (the `ModelCall` effect), in every mode. Three policies:

* ``"error"``: a request that would not fit raises `ContextWindowExceeded` before it is sent,
  naming the numbers (the session stays as it was: the call rolls back).
* ``"trim"``: the oldest turns are left out until the request fits.
* ``"summarise"``: the oldest turns are folded into a running summary, written by the
  agent's own model (or a ``summariser``) and sent as a system message after the system
  prompt. The summary is kept in the session's memory (`Memory.summary`), so it survives
  `state_dict`/`load_state_dict`, a `SessionStore` restart and replay.

Under every policy the leading system messages, the current turn (the last user message and
everything after it, such as this turn's tool rounds) and *pinned* messages (marked
``extra_info={'pinned': True}`` in memory) are always sent; an assistant message that calls
tools and the results that answer it are sent or left out together, so a request is never a
broken prompt. When the current turn alone does not fit because of a tool result, the longest
results are cut (the text says how much was cut); if it still does not fit,
`ContextWindowExceeded`. A trim or a new summary leaves some of the budget free
(``headroom``), and later requests are cut at the same place until the history outgrows the
budget again, so their start stays the same and a server's prompt cache keeps working. A
notice is logged (``plait.context``) the first time a session's history is shaped.

```python
agent = Agent(llm, context_policy="trim")                  # or "summarise", "error"
agent = Agent(llm, context_policy=ContextPolicy("summarise", summariser=small_llm, reserve=512))
```

Token counts are the model's own where it offers ``count_tokens(messages)`` (the embedded
llama.cpp model and the HF backends: exact), else estimates calibrated by the usage the
server reports (`plait.context.counting`). The context size is the model's
``context_window`` where it has one.
"""

from __future__ import annotations

from ..memory.base_memory import ContextSummary
from .counting import Calibration
from .messages import estimate_tokens, message_groups, shorten_tool_results, split_request, trim_messages
from .policy import APP_CHOICES, ContextPolicy, PolicyName, app_policy

__all__ = [
    "APP_CHOICES",
    "Calibration",
    "ContextPolicy",
    "ContextSummary",
    "PolicyName",
    "app_policy",
    "estimate_tokens",
    "message_groups",
    "shorten_tool_results",
    "split_request",
    "trim_messages",
]
