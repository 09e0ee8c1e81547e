"""One Claude Code CLI behind ``ClaudeSDKClient``: connect, and a close that always
stops the process.

``ClaudeSDKClient.disconnect()`` closes the CLI's stdin and waits up to 5 s for it
to exit before it terminates it, and a cancellation landing in it (a session
closing) can leave the process running. ``ClaudeClient.close()`` gives the SDK's
own disconnect a short grace, then stops the process itself with
``backline.processes.stop_process`` (SIGTERM, then SIGKILL, each bounded), then
lets the SDK release its tasks and pipes; it runs to its end even when the
caller is cancelled, and within ``CLOSE_BOUND`` seconds.

``connect()`` runs in a task of its own so that a close during it is no special
case: the close stops the process first, then cancels the connect. The connect,
the close and the SDK's disconnect are tasks of the client's scope, which the close
ends with: nothing the client started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from backline.processes import stop_process
from backline.tasks import TaskScope

logger = logging.getLogger("backline.claude_code")

DISCONNECT_GRACE = 0.5
"""How long the SDK's own disconnect may take before the process is stopped (an idle
CLI exits within ~0.1-0.3 s of its stdin closing)."""
STOP_STEP_TIMEOUT = 1.0
"""How long each of SIGTERM and SIGKILL is given."""
RELEASE_TIMEOUT = 0.5
"""How long the SDK may take to release its tasks once the process is gone."""
CLOSE_BOUND = DISCONNECT_GRACE + 2 * STOP_STEP_TIMEOUT + 3 * RELEASE_TIMEOUT
"""About the longest ``close()`` takes (below the runtime's 5 s bound on closing a
background session, after which its task would be abandoned)."""


class ClaudeClient:
    """Owns one ``ClaudeSDKClient`` (``sdk``) and the CLI process it starts."""

    def __init__(self, sdk: Any) -> None:
        self.sdk = sdk
        # Its owner reads how each task ended: a failed connect is raised to connect()'s
        # caller, a failed disconnect is logged at debug level by the close.
        self._scope = TaskScope("Claude Code client", log_failures=False)
        self._connecting: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        """Start the CLI. If the caller is cancelled meanwhile, the connect goes on
        until ``close()`` (which the owner always calls) stops it."""
        self._connecting = self._scope.create_task(self.sdk.connect(), name="Claude Code connect")
        await asyncio.shield(self._connecting)

    @property
    def connected(self) -> bool:
        """Connected and not closing: it takes queries and interrupts."""
        task = self._connecting
        return (
            self._closing is None
            and task is not None
            and task.done()
            and not task.cancelled()
            and task.exception() is None
        )

    @property
    def process(self) -> Any:
        """The CLI process (an anyio ``Process``), or None before it starts."""
        # claude-agent-sdk keeps it on its subprocess transport; a custom
        # transport (or a later SDK) may not have one: then only disconnect runs.
        return getattr(getattr(self.sdk, "_transport", None), "_process", None)

    async def close(self) -> None:
        """Stop the CLI and release the SDK's tasks; idempotent, bounded, and
        finished even when the caller is cancelled (then it re-raises)."""
        if self._closing is None:
            self._closing = self._scope.create_task(self._close(), name="Claude Code close")
        closing = self._closing
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await asyncio.wait([closing], timeout=CLOSE_BOUND)
            raise
        finally:
            # Every task is done by now (or was abandoned by the close, logged): this
            # only marks the scope closed, or, past the bound, cuts what still runs.
            await self._scope.aclose(RELEASE_TIMEOUT)

    async def _close(self) -> None:
        process = self.process  # before the SDK forgets it
        connecting = self._connecting
        if connecting is not None and not connecting.done():
            if process is not None:
                await _stop(process)
            connecting.cancel()  # its own cleanup is quick once the CLI is gone
            await asyncio.wait([connecting], timeout=RELEASE_TIMEOUT)
            process = process or self.process
        disconnect = self._scope.create_task(self.sdk.disconnect(), name="Claude Code disconnect")
        await asyncio.wait([disconnect], timeout=DISCONNECT_GRACE)
        if not disconnect.done() and process is not None:
            await _stop(process)
        await asyncio.wait([disconnect], timeout=RELEASE_TIMEOUT)
        if not disconnect.done():
            disconnect.cancel()
            logger.warning("Claude Code's client did not finish closing; abandoned")
            await asyncio.wait([disconnect], timeout=RELEASE_TIMEOUT)
        elif not disconnect.cancelled() and disconnect.exception() is not None:
            logger.debug("disconnecting Claude Code failed", exc_info=disconnect.exception())
        if process is not None and process.returncode is None:
            await _stop(process)  # the SDK left it running: never leave a CLI behind


async def _stop(process: Any) -> None:
    with contextlib.suppress(Exception):
        await stop_process(process, step_timeout=STOP_STEP_TIMEOUT)


__all__ = ["CLOSE_BOUND", "ClaudeClient"]
