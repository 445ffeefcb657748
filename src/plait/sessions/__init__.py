"""Sessions: what one conversation of an agent tree holds, owned in one place.

`Session` holds every agent's part of one conversation (messages, summary, tool-loop run, the
call running on it); `SessionRegistry` holds the sessions of one agent tree and the store that
keeps them. Agents, their `MemoryManager` views, the call path and the tool loop all read and
write a session through these two.
"""

from .registry import MemoryFactory, SessionRegistry, SessionSource
from .session import AgentPart, Session, memory_keypath

__all__ = ["AgentPart", "MemoryFactory", "Session", "SessionRegistry", "SessionSource", "memory_keypath"]
