"""The two deadlines of one model request (shared by the model adapters).

Besides the HTTP client's connect/read timeout (which a stream of keep-alive pings
never trips), a request must give its first output within ``first_token_timeout``
and finish within ``response_timeout`` seconds of its first iteration, retries
included (``Limits.llm_first_token_timeout`` / ``llm_response_timeout``). No vendor
import here: the OpenAI-compatible plugin uses it as well.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


class DeadlinePassed(Exception):
    """A request's first-token or response deadline passed."""

    def __init__(self, which: str, seconds: float) -> None:
        super().__init__(which)
        self.which = which
        self.seconds = seconds


class Deadlines:
    """The two deadlines of one request, on the loop's clock, from its first iteration."""

    __slots__ = ("first_token", "first_token_timeout", "response", "response_timeout")

    def __init__(self, first_token_timeout: float | None, response_timeout: float | None) -> None:
        now = asyncio.get_running_loop().time()
        self.first_token_timeout = first_token_timeout
        self.response_timeout = response_timeout
        self.first_token = None if first_token_timeout is None else now + first_token_timeout
        self.response = None if response_timeout is None else now + response_timeout

    def current(self, output_started: bool) -> tuple[float | None, str, float]:
        """The deadline in force: when, which, and its length in seconds."""
        first, end = self.first_token, self.response
        if first is None or output_started or (end is not None and end <= first):
            return end, "response_timeout", self.response_timeout or 0.0
        return first, "first_token_timeout", self.first_token_timeout or 0.0

    async def within(self, aw: Awaitable[_T], output_started: bool) -> _T:
        """Await ``aw``, but no longer than the deadline in force."""
        when, which, seconds = self.current(output_started)
        if when is None:
            return await aw
        timeout = asyncio.timeout_at(when)
        try:
            async with timeout:
                return await aw
        except TimeoutError:
            if timeout.expired():
                raise DeadlinePassed(which, seconds) from None
            raise
