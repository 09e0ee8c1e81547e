"""RunContext: what a tool receives about the call it serves."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, TypeVar

from ..llm.chat_context import FunctionCall
from .speech_handle import SpeechHandle

UserdataT = TypeVar("UserdataT")


class _Call(Protocol):
    """The call in flight (``CallState``), as its ``RunContext`` uses it."""

    async def post_update(self, message: str) -> None: ...

    async def wait_for_preamble(self) -> None: ...


class RunContext(Generic[UserdataT]):
    """Injected into a tool whose parameter is annotated ``RunContext``.

    ``update(message)`` turns the call into a deferred one: the first update
    answers the model at once (the reply goes on), the tool keeps running, and
    its later updates and its return value are voiced later, coalesced into one
    reply when the session is idle.
    """

    __backline_run_context__: ClassVar[bool] = True

    __slots__ = ("_state", "function_call", "session", "speech_handle")

    def __init__(
        self,
        *,
        session: Any,
        speech_handle: SpeechHandle,
        function_call: FunctionCall,
        state: _Call | None = None,
    ) -> None:
        self.session = session  # the backline.Session the call runs in
        self.speech_handle = speech_handle
        self.function_call = function_call
        self._state = state

    @property
    def userdata(self) -> UserdataT:
        return self.session.userdata  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"RunContext({self.function_call.name}, {self.function_call.call_id})"

    async def update(self, message: str) -> None:
        """Post progress. The first update answers the model now; later ones, and the
        return value, are spoken later (see ``docs/runtime.md``, deferred replies)."""
        if self._state is None:
            raise RuntimeError("this RunContext is not attached to a running tool call")
        await self._state.post_update(message)

    def disallow_interruptions(self) -> None:
        """Keep the user from interrupting the speech this call belongs to."""
        self.speech_handle.allow_interruptions = False

    async def wait_for_playout(self) -> None:
        """Wait until the text spoken before this call (e.g. "let me check") is played."""
        if self._state is not None:
            await self._state.wait_for_preamble()

    def _detach(self) -> Any:
        state, self._state = self._state, None
        return state
