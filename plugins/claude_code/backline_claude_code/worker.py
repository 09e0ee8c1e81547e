"""The background session: one long-lived Claude Code client per voice session.

Channels: SPEAK (Claude Code calls ``send_to_user``, a spoken ``ctx.send``),
CONTEXT-ONLY (its narration goes to ``ctx.send(text, silent=True)``), STATE
(``ctx.set_state`` after every action) and INTERRUPT (the runtime's grace window
calls ``client.interrupt()``; the turn is read to its end, then the waiting
messages run as the next turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .config import SEND_TO_USER, ClaudeCodeConfig
from .prompts import SYSTEM_PROMPT_APPEND
from .state import StatusReporter

if TYPE_CHECKING:
    from backline import BackgroundContext

logger = logging.getLogger("backline.claude_code")

DISCONNECT_TIMEOUT = 10.0
SEND_TO_USER_DESCRIPTION = (
    "Say something to the person you are working for; the voice assistant speaks it "
    "(it may rephrase it slightly). Use it for questions, decisions and a short summary "
    "when you finish. One or two short sentences, no code or markdown."
)


class TurnFailed(Exception):
    """Claude Code could not finish a turn (crash, exit, authentication, turn error)."""


ClientFactory = Callable[[Any], Any]


class ClaudeCodeWorker:
    """Runs Claude Code for one background context. ``run()`` is the entrypoint body."""

    def __init__(
        self,
        ctx: BackgroundContext,
        config: ClaudeCodeConfig,
        *,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.reporter = StatusReporter(ctx, config.cwd)
        self._client_factory = client_factory
        self._client: Any = None
        self._failed_before = False
        self._interrupted = False

    async def run(self) -> None:
        self.reporter.publish()
        self.ctx.on_interrupt(self._interrupt)
        try:
            async for batch in self.ctx.batches():
                await self._turn("\n\n".join(batch))
        finally:
            await self._disconnect()

    # -- one turn ------------------------------------------------------------------
    async def _turn(self, text: str) -> None:
        async with self.ctx.turn():
            self._interrupted = False
            self.reporter.task_started(text)
            try:
                client = await self._ensure_client()
                await client.query(text)
                await self._read_until_result(client)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                await self._fail(e)
            else:
                if self._interrupted:
                    self.reporter.task_interrupted()
                else:
                    self.reporter.task_finished()

    async def _read_until_result(self, client: Any) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, ToolUseBlock

        auth_error: str | None = None
        async for message in client.receive_response():
            if isinstance(message, AssistantMessage):
                if message.error is not None:
                    auth_error = message.error
                for block in message.content:
                    if isinstance(block, TextBlock) and block.text.strip():
                        await self.ctx.send(block.text.strip(), silent=True)
                    elif isinstance(block, ToolUseBlock):
                        self.reporter.tool_used(block.name, dict(block.input or {}))
            elif isinstance(message, ResultMessage):
                if self._interrupted:
                    return  # the turn was cut short on purpose; the next one follows
                if auth_error == "authentication_failed":
                    raise TurnFailed(
                        "authentication failed: check ANTHROPIC_API_KEY (or log in with `claude`)"
                    )
                if message.is_error:
                    detail = (message.result or message.subtype or "unknown error").strip()
                    raise TurnFailed(f"the task ended with an error: {detail[:200]}")
                return
        raise TurnFailed("Claude Code exited in the middle of the task")

    # -- the client ------------------------------------------------------------------
    def _options(self) -> Any:
        from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

        ctx = self.ctx

        @tool("send_to_user", SEND_TO_USER_DESCRIPTION, {"message": str})
        async def send_to_user(args: dict[str, Any]) -> dict[str, Any]:
            message = str(args.get("message", "")).strip()
            if not message:
                return {
                    "content": [{"type": "text", "text": "Nothing to send: message is empty."}],
                    "is_error": True,
                }
            await ctx.send(message)
            return {"content": [{"type": "text", "text": "Delivered to the user."}]}

        config = self.config
        return ClaudeAgentOptions(
            cwd=str(config.cwd),
            model=config.model,
            permission_mode=config.permission_mode,  # type: ignore[arg-type]
            tools=config.tools,
            allowed_tools=config.permitted_tools,
            disallowed_tools=[] if config.allow_bash else ["Bash"],
            system_prompt={
                "type": "preset",
                "preset": "claude_code",
                "append": SYSTEM_PROMPT_APPEND,
            },
            mcp_servers={"voice": create_sdk_mcp_server("voice", tools=[send_to_user])},
            env=dict(config.env),
        )

    async def _ensure_client(self) -> Any:
        if self._client is not None:
            return self._client
        if self._failed_before:
            self.reporter.restarting()
        options = self._options()
        if self._client_factory is not None:
            client = self._client_factory(options)
        else:
            from claude_agent_sdk import ClaudeSDKClient

            client = ClaudeSDKClient(options)
        await client.connect()
        self._client = client
        if self._failed_before:
            self.reporter.working()
        return client

    async def _interrupt(self) -> None:
        client = self._client
        if client is None:
            return
        self._interrupted = True
        self.reporter.interrupted()
        await client.interrupt()

    async def _fail(self, error: BaseException) -> None:
        reason = _describe(error)
        logger.warning("Claude Code failed: %s", reason)
        self._failed_before = True
        await self._disconnect()
        self.reporter.failed(reason)
        with contextlib.suppress(RuntimeError):
            await self.ctx.send(f"Claude Code failed: {reason}.", silent=True)
            await self.ctx.send(
                f"Claude Code stopped because of a problem ({_short(reason)}). "
                "The next message will restart it."
            )

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            await asyncio.wait_for(client.disconnect(), DISCONNECT_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.debug("disconnecting Claude Code failed", exc_info=True)


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, TurnFailed):
        return text
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}"


def _short(reason: str) -> str:
    return reason.split(":", 1)[0] if len(reason) > 60 else reason


__all__ = ["SEND_TO_USER", "ClaudeCodeWorker", "TurnFailed"]
