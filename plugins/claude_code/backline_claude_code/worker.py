"""The background session: one long-lived Claude Code client per voice session.

Channels: SPEAK (Claude Code calls ``send_to_user``, a spoken ``ctx.send``),
CONTEXT-ONLY (its narration goes to ``ctx.send(text, silent=True)``), STATE
(``ctx.set_state`` after every action) and INTERRUPT (the runtime's grace window
calls ``client.interrupt()``; the turn is read to its end, then the waiting
messages run as the next turn).

Every tool call passes ``FolderGuard`` (confine.py); with ``approve="ask"`` a call the
permission mode does not already allow is then put to the user (approvals.py, through
``ctx.ask``); every turn has a deadline
(``TurnDeadline``); closing stops the CLI process in every path (client.py). When the
session starts, git checks the folder (workspace.py): anything but a clean repository
is said in one sentence, and with ``require_clean`` no task starts until it is clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .approvals import Approvals
from .client import ClaudeClient
from .config import REQUIRE_CLEAN_OPTION, SEND_TO_USER, ClaudeCodeConfig
from .confine import FolderGuard, deny_output
from .memory import project_memory
from .prompts import SYSTEM_PROMPT_APPEND
from .state import StatusReporter
from .workspace import check_git

if TYPE_CHECKING:
    from backline import BackgroundContext

logger = logging.getLogger("backline.claude_code")

SEND_TO_USER_DESCRIPTION = (
    "Say something to the person you are working for; the voice assistant speaks it "
    "(it may rephrase it slightly). Use it for questions, decisions and a short summary "
    "when you finish. One or two short sentences, no code or markdown."
)
#: What a failing model request means, in words the voice agent can say.
API_ERRORS = {
    "authentication_failed": (
        "the model server refused its credentials; check ANTHROPIC_API_KEY or log in with claude"
    ),
    "billing_error": "the model account has a billing problem",
    "rate_limit": "the model server's rate limit was reached",
    "overloaded": "the model server is overloaded",
    "server_error": "the model server had an internal error",
    "invalid_request": "the model server rejected the request",
}
#: Retrying these does not help once a first retry (a possible credential refresh) failed.
HOPELESS_ERRORS = frozenset({"authentication_failed", "billing_error"})


class TurnFailed(Exception):
    """Claude Code could not finish a turn (crash, exit, authentication, turn error,
    deadline). Its message is a plain sentence the voice agent can relay."""


ClientFactory = Callable[[Any], Any]


def api_problem(error: object, status: object) -> str:
    """A failing model request (the CLI's ``api_retry`` ``error`` and ``error_status``)."""
    if isinstance(error, str) and error in API_ERRORS:
        return API_ERRORS[error]
    return f"the model request failed (HTTP {status})" if status else "the model request failed"


class TurnDeadline:
    """The deadline of one turn: ``turn_timeout`` after the task reached Claude Code, or sooner,
    ``retry_timeout`` after the model request started failing, while it still fails."""

    def __init__(self, config: ClaudeCodeConfig, timer: asyncio.Timeout) -> None:
        self._config = config
        self._timer = timer
        self._loop = asyncio.get_running_loop()
        self._turn_end = self._loop.time() + config.turn_timeout
        self._retry_end: float | None = None
        self.problem: str | None = None
        timer.reschedule(self._turn_end)

    def retrying(self, problem: str) -> None:
        self.problem = problem
        if self._retry_end is None:
            self._retry_end = self._loop.time() + self._config.retry_timeout
            self._timer.reschedule(min(self._turn_end, self._retry_end))

    def progressed(self) -> None:
        if self._retry_end is not None:
            self._retry_end = self.problem = None
            self._timer.reschedule(self._turn_end)

    @property
    def expired(self) -> bool:
        return self._timer.expired()

    def reason(self) -> str:
        if self._retry_end is not None and self._retry_end <= self._turn_end:
            return (
                f"{self.problem}, and it did not recover within "
                f"{_duration(self._config.retry_timeout)}"
            )
        return f"the task took longer than {_duration(self._config.turn_timeout)}, its time limit"


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
        self.guard = FolderGuard(config.cwd, config.home, config.permitted_tools)
        self.approvals = (
            Approvals(ctx, config.cwd, config.approve_timeout) if config.approve == "ask" else None
        )
        self._client_factory = client_factory
        self._client: ClaudeClient | None = None
        self._failed_before = False
        self._interrupted = False
        self._cleared = not config.require_clean  # it may start editing

    async def run(self) -> None:
        for warning in self.config.warnings:
            logger.warning("Claude Code in %s: %s", self.config.cwd, warning)
        self.reporter.publish()
        self.ctx.on_interrupt(self._interrupt)
        await self._check_folder()
        try:
            async for batch in self.ctx.batches():
                await self._turn("\n\n".join(batch))
        finally:
            await self._close_client()

    # -- the folder, before any edit -----------------------------------------------------
    async def _check_folder(self) -> None:
        """What git says about the folder: in the state, and said when it matters."""
        check = await check_git(self.config.cwd)
        self.reporter.git(check.state)
        refusal = None if self._cleared else check.refusal("Claude Code", REQUIRE_CLEAN_OPTION)
        if refusal is not None:
            self.reporter.needs_clean_tree(refusal)
        self._cleared = refusal is None
        sentence = refusal or check.heads_up("Claude Code")
        if sentence is not None:
            with contextlib.suppress(RuntimeError):
                await self.ctx.send(sentence)

    async def _refused(self) -> bool:
        """A clean tree is required and still missing: the task is refused, aloud."""
        if self._cleared:
            return False
        check = await check_git(self.config.cwd)
        self.reporter.git(check.state)
        refusal = check.refusal("Claude Code", REQUIRE_CLEAN_OPTION)
        if refusal is None:
            self._cleared = True  # from now on, its own changes are no reason to stop
            return False
        self.reporter.needs_clean_tree(refusal)
        with contextlib.suppress(RuntimeError):
            await self.ctx.send(refusal)
        return True

    # -- one turn ------------------------------------------------------------------
    async def _turn(self, text: str) -> None:
        async with self.ctx.turn():
            self._interrupted = False
            self.reporter.task_started(text)
            if await self._refused():
                return
            deadline: TurnDeadline | None = None
            try:
                # Starting the CLI is bounded by the SDK (its 60 s initialize timeout).
                client = await self._ensure_client()
                async with asyncio.timeout(None) as timer:
                    deadline = TurnDeadline(self.config, timer)
                    await client.query(text)
                    await self._read_until_result(client, deadline)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if deadline is not None and deadline.expired:
                    await self._fail(TurnFailed(deadline.reason()))
                else:
                    await self._fail(e)
            else:
                if self._interrupted:
                    self.reporter.task_interrupted()
                else:
                    self.reporter.task_finished()

    async def _read_until_result(self, client: Any, deadline: TurnDeadline) -> None:
        from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, TextBlock

        auth_error: str | None = None
        async with contextlib.aclosing(client.receive_response()) as messages:
            async for message in messages:
                if isinstance(message, SystemMessage):
                    if message.subtype == "api_retry":
                        await self._retrying(message.data, deadline)
                    continue
                if deadline.problem is not None:  # an answer: the model is reachable again
                    deadline.progressed()
                    self.reporter.working()
                if isinstance(message, AssistantMessage):
                    if message.error is not None:
                        auth_error = message.error
                    for block in message.content:
                        if isinstance(block, TextBlock) and block.text.strip():
                            await self.ctx.send(block.text.strip(), silent=True)
                elif isinstance(message, ResultMessage):
                    if self._interrupted:
                        return  # the turn was cut short on purpose; the next one follows
                    if auth_error == "authentication_failed":
                        raise TurnFailed(API_ERRORS["authentication_failed"])
                    if message.is_error:
                        detail = (message.result or message.subtype or "unknown error").strip()
                        raise TurnFailed(f"the task ended with an error: {detail[:200]}")
                    return
        raise TurnFailed("Claude Code exited in the middle of the task")

    async def _retrying(self, data: dict[str, Any], deadline: TurnDeadline) -> None:
        error = data.get("error")
        problem = api_problem(error, data.get("error_status"))
        attempt = int(data.get("attempt") or 1)
        limit = data.get("max_retries")
        if error in HOPELESS_ERRORS and attempt >= 2:
            raise TurnFailed(problem)
        first = deadline.problem is None
        deadline.retrying(problem)
        self.reporter.retrying(problem, attempt, int(limit) if limit else None)
        if first:
            await self.ctx.send(
                f"Claude Code cannot reach its model ({problem}); it is retrying.", silent=True
            )

    # -- the client ------------------------------------------------------------------
    def _options(self) -> Any:
        from claude_agent_sdk import (
            ClaudeAgentOptions,
            HookMatcher,
            PermissionResultAllow,
            PermissionResultDeny,
            create_sdk_mcp_server,
            tool,
        )

        ctx, guard, reporter, approvals = self.ctx, self.guard, self.reporter, self.approvals

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

        async def confine(input_data: Any, tool_use_id: Any, context: Any) -> Any:
            # Called by the CLI before every tool use, whatever its permission mode.
            name = str(input_data.get("tool_name", ""))
            tool_input = input_data.get("tool_input") or {}
            reason = guard.check(name, tool_input)
            if reason is not None:
                logger.info("refused a %s call: %s", name, reason)
                reporter.refused(name)
                return deny_output(reason)
            reporter.tool_used(name, dict(tool_input))
            return {}

        async def landed(input_data: Any, tool_use_id: Any, context: Any) -> Any:
            # Called by the CLI after a tool call succeeded: an edit is recorded now.
            name = str(input_data.get("tool_name", ""))
            reporter.tool_finished(name, dict(input_data.get("tool_input") or {}))
            return {}

        async def can_use_tool(name: str, tool_input: dict[str, Any], context: Any) -> Any:
            # Called for the calls the CLI would ask a person about: the same rule
            # first; then, with --approve ask, the person (approvals.py).
            reason = guard.check(name, tool_input)
            if reason is not None:
                return PermissionResultDeny(message=reason)
            if approvals is None or name == SEND_TO_USER:
                return PermissionResultAllow()
            decision = await approvals.decide(name, tool_input)
            reporter.decided(name, tool_input, decision.outcome)
            if decision.allowed:
                return PermissionResultAllow()
            return PermissionResultDeny(message=decision.message)

        config = self.config
        return ClaudeAgentOptions(
            cwd=str(config.cwd),
            model=config.model,
            permission_mode=config.permission_mode,  # type: ignore[arg-type]
            tools=config.tools,
            # No allow rules: an allowed tool would skip can_use_tool. The hook and
            # the callback decide every call (inside the folder: yes).
            allowed_tools=[],
            disallowed_tools=[] if config.allow_bash else ["Bash"],
            hooks={
                "PreToolUse": [HookMatcher(matcher=None, hooks=[confine], on_failure="block")],
                "PostToolUse": [HookMatcher(matcher=None, hooks=[landed])],
            },
            can_use_tool=can_use_tool,
            # Nothing from the repository runs unless the user opted in: no
            # .claude/settings.json hooks, and no .mcp.json servers ever.
            setting_sources=list(config.setting_sources),  # type: ignore[arg-type]
            strict_mcp_config=True,
            system_prompt={
                "type": "preset",
                "preset": "claude_code",
                # The repository's CLAUDE.md, read here: the CLI reads it only with
                # the project settings, which bring the repository's hooks.
                "append": SYSTEM_PROMPT_APPEND
                + (project_memory(config.cwd) if config.reads_claude_md else ""),
            },
            mcp_servers={"voice": create_sdk_mcp_server("voice", tools=[send_to_user])},
            # Each Bash command starts in the working directory.
            env={"CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR": "1", **config.env},
        )

    async def _ensure_client(self) -> Any:
        if self._client is not None:
            return self._client.sdk
        if self._failed_before:
            self.reporter.restarting()
        options = self._options()
        if self._client_factory is not None:
            sdk = self._client_factory(options)
        else:
            from claude_agent_sdk import ClaudeSDKClient

            sdk = ClaudeSDKClient(options)
        # Owned before it starts: a close while connecting stops it too.
        self._client = client = ClaudeClient(sdk)
        await client.connect()
        if self._failed_before:
            self.reporter.working()
        return sdk

    async def _interrupt(self) -> None:
        client = self._client
        if client is None or not client.connected:
            return  # nothing runs yet: the waiting message is simply the next turn
        self._interrupted = True
        self.reporter.interrupted()
        await client.sdk.interrupt()

    async def _fail(self, error: BaseException) -> None:
        reason = _describe(error)
        logger.warning("Claude Code failed: %s", reason)
        self._failed_before = True
        await self._close_client()
        self.reporter.failed(reason)
        with contextlib.suppress(RuntimeError):
            await self.ctx.send(f"Claude Code failed: {reason}.", silent=True)
            await self.ctx.send(
                f"Claude Code stopped because of a problem: {_short(reason)}. "
                "The next message will restart it.",
                kind="failed",  # voiced before the other backgrounds' news
            )

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, TurnFailed):
        return text
    return f"{type(error).__name__}: {text.splitlines()[0][:200]}"


def _short(reason: str) -> str:
    return reason.split(":", 1)[0] if len(reason) > 60 else reason


def _duration(seconds: float) -> str:
    if seconds >= 120 and seconds % 60 == 0:
        return f"{int(seconds // 60)} minutes"
    return f"{seconds:g} seconds"


__all__ = ["SEND_TO_USER", "ClaudeCodeWorker", "TurnDeadline", "TurnFailed", "api_problem"]
