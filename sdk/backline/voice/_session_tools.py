"""The tools every agent of a session sees: the session's own and its parts', and
the names the parts reserve. One owner, one version number: an agent's tool map is
rebuilt only when this changes (or the agent's own list is replaced)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..llm.tools import FunctionTool
from .agent import Agent, check_tool_names
from .parts import SessionPart


def taken_by_others(
    part: SessionPart, tools: Iterable[str], toolbox: SessionTools
) -> frozenset[str]:
    """The tool names ``part``'s tools must not take: every name in use (``tools``, the
    reserved ones) but the part's own."""
    own = {t.name for t in part.tools} | set(part.reserved_names())
    return frozenset({*tools, *toolbox.reserved} - own)


class SessionTools:
    """The session-level tools (``tools=`` and the parts'), checked once: a clash
    fails the session's construction, never half-applied."""

    __slots__ = ("_cached", "_own", "_parts", "_reserved", "version")

    def __init__(self, tools: Iterable[FunctionTool], parts: Iterable[SessionPart]) -> None:
        own = list(tools)
        check_tool_names(own, where="Session tools")
        found = list(parts)
        for part in found:
            if not isinstance(part, SessionPart):
                raise TypeError(f"Session parts: expected a SessionPart, got {part!r}")
        reserved: dict[str, str] = {}
        for part in found:
            reserved.update(part.reserved_names())
        self._own = own
        self._parts = tuple(found)
        self._reserved = reserved
        self.version = 0
        self._cached: tuple[int, list[FunctionTool]] | None = None
        self.check_session(own)

    @property
    def parts(self) -> tuple[SessionPart, ...]:
        return self._parts

    @property
    def reserved(self) -> dict[str, str]:
        """Reserved tool name -> who reserved it."""
        return self._reserved

    def changed(self) -> None:
        """A part's tools changed (or it started or closed): maps are rebuilt."""
        self.version += 1

    def all(self) -> list[FunctionTool]:
        """The session's own tools, then its parts' (read-only: it may be shared)."""
        if not self._parts:
            return self._own
        cached = self._cached
        if cached is not None and cached[0] == self.version:
            return cached[1]
        tools = [*self._own]
        for part in self._parts:
            tools.extend(part.tools)
        self._cached = (self.version, tools)
        return tools

    def check_session(self, tools: Sequence[FunctionTool]) -> None:
        reserved = self._reserved
        for t in tools:
            if t.name in reserved:
                raise ValueError(
                    f"duplicate function name: {t.name} is reserved for {reserved[t.name]}"
                )

    def check_agent(self, agent: Agent, tools: Sequence[FunctionTool]) -> None:
        """Raise if ``tools`` (of ``agent``) take a reserved name or a session tool's."""
        reserved = self._reserved
        session_names = {t.name for t in self.all()} - set(reserved)
        for t in tools:
            if t.name in reserved:
                raise ValueError(
                    f"{agent.label}: duplicate function name: {t.name} is reserved for "
                    f"{reserved[t.name]}"
                )
            if t.name in session_names:
                raise ValueError(
                    f"{agent.label}: tool {t.name!r} has the same name as a session tool"
                )
