"""The ``cli_agent`` background session: an agent CLI behind the voice conversation.

For each batch of messages (``ctx.batches()``) one task runs: Claude Code gets it
as the next user message of its persistent process, any other agent a run of its
own. The agent reaches the user through backline's MCP voice channel (the URL of
this very session); its output lines become context notes, its process and its
``set_status`` the live state. A message that arrives while it works interrupts it
after the grace window (the runtime decides), unless the agent is waiting for the
user, or has taken the message already. A crash is reported; the next message
starts a fresh run.

At start it finds the agent's program (on the agent's ``PATH``, or Claude Code bundled
in claude-agent-sdk) and checks the folder with git; a program that cannot be found,
a folder that is not a git repository or has uncommitted changes is said in one
sentence, and with ``require_clean`` no task starts until the tree is clean. The agent
gets an allow-listed environment (``environment.py``), never backline's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from backline.limits import truncate_text
from backline.mcp import Endpoint, Hosting, VoiceChannel, hosted_voice_channel, limits_of

from . import state as S
from .config import (
    REQUIRE_CLEAN_OPTION,
    AgentConfig,
    claude_launch,
    mcp_config,
    task_launch,
    write_private,
)
from .environment import Program, ProgramNotFound, agent_environment, find_program
from .processes import AgentExited, ClaudeProcess, LineTooLong, TaskProcess
from .prompts import AGENT_GUIDANCE, task_prompt
from .workspace import check_git

if TYPE_CHECKING:
    from backline import BackgroundContext

logger = logging.getLogger("backline.cli_agent")

SUMMARY_CHARS = 300


@dataclass(frozen=True)
class Outcome:
    """How one task ended."""

    kind: Literal["finished", "interrupted", "failed", "crashed", "refused"]
    detail: str = ""
    status: str | None = None
    """For ``refused`` (the task did not start): the status to show."""


class CliAgentWorker:
    """Runs the agent for one background context; ``run()`` is the entrypoint body."""

    def __init__(self, ctx: BackgroundContext, config: AgentConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.channel = VoiceChannel.of(ctx)
        self.reporter = S.StateReporter(ctx, config.name)
        self.limits = limits_of(ctx)
        self.endpoint: Endpoint | None = None
        self.env = agent_environment(
            config.kind or "generic", os.environ, pass_env=config.pass_env, explicit=config.env
        )
        """The agent's whole environment (before its voice channel's variables)."""
        self._program: Program | None = None
        self._cleared = not config.require_clean  # it may start editing
        self._private = Path()
        self._runs = 0
        self._config_file: Path | None = None
        self._claude: ClaudeProcess | None = None
        self._current: TaskProcess | ClaudeProcess | None = None
        self._interrupted = False
        self._interrupted_task: str | None = None
        self._notes = 0
        self._checked_init = False

    async def run(self) -> None:
        self.channel.on_status = self.reporter.agent_status
        self.channel.on_listening = self.reporter.listening
        self.ctx.on_interrupt(self._interrupt)
        attached = self.config.argv is None
        self.reporter.set_status(S.ATTACHED if attached else S.IDLE)
        with tempfile.TemporaryDirectory(prefix="backline-cli-agent-") as private:  # 0700
            self._private = Path(private)
            await self._check_start()
            async with hosted_voice_channel() as hosting:
                await self._connect(hosting, self._private)
                try:
                    if attached:  # an agent started by the user takes the messages over MCP
                        await asyncio.Event().wait()
                    async for batch in self.ctx.batches():
                        await self._task(batch)
                finally:
                    await self._close_claude()

    # -- before any task: the program, the folder --------------------------------------------
    async def _check_start(self) -> None:
        """Find the program and check the folder with git; say what the user must know."""
        missing = None if self.config.argv is None else self._find_program()
        if missing is not None:
            self.reporter.set_status(S.CANNOT_START, error=missing)
            await self._say(missing)
        check = await check_git(self.config.cwd)
        self.reporter.git(check.state)
        refusal = None if self._cleared else check.refusal(self.config.name, REQUIRE_CLEAN_OPTION)
        self._cleared = refusal is None
        if missing is not None:
            return  # the one thing to say, and to show
        if refusal is not None:
            self.reporter.set_status(S.NEEDS_CLEAN_TREE, error=refusal)
        agent = self.config.name if self.config.argv is not None else "the agent"
        sentence = refusal or check.heads_up(agent)
        if sentence is not None:
            await self._say(sentence)

    def _find_program(self) -> str | None:
        """Find the agent's program (the state says where); the problem, or None."""
        assert self.config.argv is not None and self.config.kind is not None
        try:
            self._program = find_program(self.config.argv[0], self.config.kind, self.env)
        except ProgramNotFound as e:
            self.reporter.program(None, "not found")
            return f"{self.config.name} cannot start: {e}."
        self.reporter.program(self._program.path, self._program.source)
        return None

    async def _refusal(self) -> Outcome | None:
        """Why this task may not start (the program is missing, the tree is not clean)."""
        if self._program is None:
            missing = self._find_program()
            if missing is not None:
                return Outcome("refused", missing, S.CANNOT_START)
        if not self._cleared:
            check = await check_git(self.config.cwd)
            self.reporter.git(check.state)
            refusal = check.refusal(self.config.name, REQUIRE_CLEAN_OPTION)
            if refusal is not None:
                return Outcome("refused", refusal, S.NEEDS_CLEAN_TREE)
            self._cleared = True  # from now on, its own changes are no reason to stop
        return None

    @property
    def _argv(self) -> tuple[str, ...]:
        """The agent command, with its program where it was found."""
        assert self.config.argv is not None and self._program is not None
        return (self._program.path, *self.config.argv[1:])

    # -- the voice channel ---------------------------------------------------------------
    async def _connect(self, hosting: Hosting, private: Path) -> None:
        try:
            self.endpoint = await hosting.endpoint(self.ctx)
        except RuntimeError as e:
            reason = str(e)
            self.reporter.voice_channel(f"unavailable: {reason}")
            await self._note(
                f"backline's MCP endpoint is not available ({reason}): the agent runs without "
                "the voice tools (it cannot speak to the user or hear corrections while it works)."
            )
            return
        self._config_file = write_private(private / "mcp.json", mcp_config(self.endpoint))
        self.reporter.voice_channel(f"offered at {self.endpoint.url}")

    async def _check_init(self, event: dict[str, Any]) -> None:
        """Claude Code says nothing when a server fails to connect: its init event does."""
        if self._checked_init or self.endpoint is None:
            return
        self._checked_init = True
        servers = event.get("mcp_servers") or []
        status = next((s.get("status") for s in servers if s.get("name") == "backline"), None)
        if status == "connected":
            self.reporter.voice_channel("connected")
            return
        what = f"its status is {status!r}" if status else "it is not in its list"
        self.reporter.voice_channel(f"not connected: {what}")
        await self._note(
            f"Claude Code did not connect to backline's voice channel ({what}); check "
            "`backline mcp status` and the agent command."
        )
        await self._say(
            "Claude Code could not connect to backline's voice tools, so it cannot talk to you "
            "or hear corrections while it works; its replies come through as notes."
        )

    # -- one task -------------------------------------------------------------------------
    async def _task(self, batch: list[str]) -> None:
        async with self.ctx.turn():
            text = "\n\n".join(batch)
            self._interrupted = False
            self._notes = 0
            spoken_before = self.channel.spoken
            self.reporter.task_started(text)
            try:
                outcome = await self._refusal()
                if outcome is None:
                    if self.config.kind == "claude":
                        outcome = await self._claude_task(text)
                    else:
                        outcome = await self._process_task(batch)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                logger.warning("the agent failed", exc_info=True)
                outcome = Outcome("crashed", f"{type(e).__name__}: {e}")
            finally:
                self._current = None
                self.channel.release()
            self._interrupted_task = text if outcome.kind == "interrupted" else None
            await self._report(outcome, spoke=self.channel.spoken > spoken_before)

    async def _process_task(self, batch: list[str]) -> Outcome:
        assert self.config.kind is not None
        prompt = task_prompt(batch, self._interrupted_task)
        self._runs += 1
        prompt_path = self._private / f"task-{self._runs}.txt"  # only with {prompt_file}
        launch = task_launch(
            self.config.kind, self._argv, prompt, self.endpoint, self._config_file, prompt_path
        )
        run = TaskProcess(launch, self.config.cwd, self.env, self._line_limit)
        self._current = run
        self.reporter.set_status(S.STARTING)
        last: list[str] = []

        def started(pid: int) -> None:
            self.reporter.process_started(pid)
            self.reporter.set_status(S.WORKING)

        async def line(text: str) -> None:
            if text.strip():
                last[:] = [text.strip()]
                await self._note(text.strip())

        end = await run.run(started, line)
        self.reporter.process_exited(end.code)
        await self._notes_done()
        if self._interrupted:
            return Outcome("interrupted")
        if end.cut is not None:
            return Outcome("failed", end.cut)
        if end.code == 0:
            return Outcome("finished", last[0] if last else "")
        tail = end.stderr.splitlines()
        return Outcome("crashed", f"exit code {end.code}" + (f": {tail[-1]}" if tail else ""))

    async def _claude_task(self, text: str) -> Outcome:
        claude = await self._ensure_claude()
        self._current = claude
        self.reporter.set_status(S.WORKING)
        try:
            result = await claude.turn(text, self._claude_event)
        except LineTooLong as e:
            await self._close_claude()  # stopped: it is never left blocked on its output
            return Outcome("failed", str(e))
        except AgentExited as e:
            await self._close_claude()
            return Outcome("interrupted") if self._interrupted else Outcome("crashed", str(e))
        finally:
            await self._notes_done()
        if self._interrupted:
            return Outcome("interrupted")
        if result.get("is_error"):
            detail = str(result.get("result") or result.get("subtype") or "unknown error")
            return Outcome("failed", detail.strip()[:200])
        return Outcome("finished", str(result.get("result") or "").strip())

    async def _ensure_claude(self) -> ClaudeProcess:
        if self._claude is not None and self._claude.alive:
            return self._claude
        await self._close_claude()
        launch = claude_launch(self._argv, self._config_file, AGENT_GUIDANCE)
        claude = ClaudeProcess(launch, self.config.cwd, self.env, self._line_limit)
        self.reporter.set_status(S.STARTING)
        pid = await claude.start()
        self._claude = claude
        self._checked_init = False
        self.reporter.process_started(pid)
        return claude

    async def _close_claude(self) -> None:
        claude, self._claude = self._claude, None
        if claude is not None:
            await claude.close()
            if not self.ctx.closed:
                self.reporter.process_exited(None)

    async def _claude_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            await self._check_init(event)
        elif kind == "assistant":
            for block in (event.get("message") or {}).get("content") or []:
                if block.get("type") == "text" and str(block.get("text", "")).strip():
                    await self._note(str(block["text"]).strip())
                elif block.get("type") == "tool_use":
                    name = str(block.get("name", ""))
                    if not name.startswith("mcp__backline__"):
                        self.reporter.activity(f"used {name}")

    @property
    def _line_limit(self) -> int:
        return self.config.max_line_bytes

    # -- interrupts -------------------------------------------------------------------------
    async def _interrupt(self) -> None:
        """A message arrived while the agent works (past the grace window)."""
        current = self._current
        if current is None or self.channel.listening or self.ctx.waiting == 0:
            return  # the agent is waiting for the user, or has the message already
        self.channel.hold()  # nothing more goes to an agent that is being stopped
        self._interrupted = True
        self.reporter.set_status(S.INTERRUPTED)
        await current.interrupt()

    # -- reporting --------------------------------------------------------------------------
    async def _report(self, outcome: Outcome, *, spoke: bool) -> None:
        name = self.config.name
        if outcome.kind == "finished":
            self.reporter.task_ended(S.IDLE_AGAIN)
            if not spoke:  # the agent said nothing itself: tell the user it is done
                summary, _ = truncate_text(outcome.detail, SUMMARY_CHARS, "the summary")
                await self._say(f"{name} finished: {summary}" if summary else f"{name} finished.")
        elif outcome.kind == "interrupted":
            self.reporter.task_ended(S.INTERRUPTED)
        elif outcome.kind == "refused":  # it did not start: the reason, in full
            self.reporter.task_ended(outcome.status or S.FAILED, error=outcome.detail)
            await self._say(outcome.detail)
        elif outcome.kind == "failed":
            self.reporter.task_ended(S.FAILED, error=outcome.detail)
            await self._note(f"{name}'s task ended with an error: {outcome.detail}")
            await self._say(f"{name} could not finish the task: {_first_line(outcome.detail)}.")
        else:
            self.reporter.task_ended(S.CRASHED, error=outcome.detail)
            await self._note(f"{name} crashed: {outcome.detail}")
            await self._say(
                f"{name} stopped because of an error ({_first_line(outcome.detail)}). "
                "The next message starts it again."
            )

    async def _note(self, text: str) -> None:
        """A context note, within the output bounds of one task."""
        self._notes += 1
        if self._notes > self.config.max_output_lines:
            return
        cut, _ = truncate_text(text, self.limits.max_mcp_message_chars, "an output line")
        with contextlib.suppress(RuntimeError):  # the session closed
            await self.ctx.send(cut, silent=True)

    async def _notes_done(self) -> None:
        left_out = self._notes - self.config.max_output_lines
        if left_out > 0:
            self._notes = 0
            await self._note(f"({left_out} more output lines of {self.config.name} not shown)")

    async def _say(self, text: str) -> None:
        with contextlib.suppress(RuntimeError):
            await self.ctx.send(text)


def _first_line(text: str) -> str:
    line = (text.strip().splitlines() or ["an error"])[0]
    return line if len(line) <= 120 else line[:119] + "…"
