"""The text console: talk to the voice agent in a terminal.

The user types; replies stream as they are generated; agent-initiated turns
(background updates) appear the moment they are spoken, with no input needed; a
live status line shows the agent state and each background's state; when a
background finishes, fails or asks something, the terminal's bell rings at once
and a line marked 🔔 says so (``background_alert``). In a real terminal it uses
prompt_toolkit (the status line is a bottom toolbar and the reply in progress
streams there); otherwise it prints plain lines. Input that is
not a terminal (a pipe, a file) is a script: each line is sent once the reply to
the one before ended, and its end waits for the pending replies. Ctrl-C,
Ctrl-D or ``/quit`` close the session cleanly (bounded). A line longer than
``Limits.max_user_turn_chars`` is refused with a message, and the console goes on.

``run_console`` runs one session; ``run_console_front_end`` is ``backline console``
itself (a front end of ``backline.app``: the session from the options, the voice
channel served meanwhile), for plugins' console commands too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..limits import DEFAULT_LIMITS, Limits
from ..llm import close_llm, warm_up_llm
from ..tasks import TaskScope
from ._alerts import BELL, alert_line
from ._console_view import LEAVE_HINT, ConsoleOutput, ConsoleView, wrap_items
from ._diagnostics import describe_error
from ._view import NOTE_WIDTH, shorten

if TYPE_CHECKING:
    from ..app import SessionOptions
    from ..plugins import PluginManager
    from ..session import Session
    from ..voice.agent import Agent
    from ._console_voice import ConsoleVoice

__all__ = [
    "LEAVE_HINT",
    "ConsoleOutput",
    "ConsoleView",
    "run_console",
    "run_console_front_end",
    "wrap_items",
]

EOF_IDLE_TIMEOUT = 120.0
"""With piped input, how long the agent may take to answer a line before the next one
is sent (and, at the end of the input, before the console closes)."""
QUIT_COMMANDS = frozenset({"/quit", "/exit", "/q"})
_UTF8_MAX = 4  # bytes per character, at most
STATUS_EVENTS: tuple[Any, ...] = (
    "agent_state_changed",
    "user_state_changed",
    "background_state",
    "background_status",
)


def _use_rich(stdin: TextIO, stdout: TextIO) -> bool:
    if os.environ.get("BACKLINE_CONSOLE_PLAIN"):
        return False
    if os.environ.get("TERM", "") in ("", "dumb"):
        return False
    try:
        return stdin.isatty() and stdout.isatty()
    except (AttributeError, ValueError):
        return False


async def run_console(
    session: Session[Any],
    agent: Agent,
    *,
    rich: bool | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    banner: str | None = None,
    log_path: os.PathLike[str] | str | None = None,
    llm: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
    voice: ConsoleVoice | None = None,
) -> None:
    """Run a conversation in the terminal until the user quits; closes the session.

    An error is shown as one line worded for the user (``llm`` names the provider
    for the advice), pointing at ``log_path`` for the details when given. A line
    longer than ``limits.max_user_turn_chars`` is not sent: the console says so and
    reads the next one. ``voice``: speak the replies too, and what a voice front end
    adds (``backline voice``).
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    use_rich = _use_rich(stdin, stdout) if rich is None else rich
    view = ConsoleView(session, extra_items=voice.status_items if voice else None)
    errors = _ErrorPrinter(log_path, llm)
    if use_rich:
        await _run_rich(session, agent, view, banner, errors, limits, voice)
    else:
        await _run_plain(session, agent, view, stdin, stdout, banner, errors, limits, voice)


def run_console_front_end(
    options: SessionOptions, *, manager: PluginManager | None = None, plain: bool = False
) -> None:
    """What ``backline console`` does: build the session from ``options`` with
    ``manager``'s plugins (default: ``backline.app.plugin_manager()``), then run the
    console until the user quits, serving the voice channel to MCP agents meanwhile.
    ``plain``: plain lines even in a terminal. Errors in the options raise click
    exceptions before anything runs."""
    from ..app import available_backgrounds, hosting_voice_channel, plugin_manager, prepare_session
    from ._diagnostics import log_to_file

    manager = manager or plugin_manager()
    session, agent = prepare_session(manager, options)
    log_path = log_to_file(options.log_file)
    if session.background:
        names = ", ".join(session.background.sorted_ids())
        banner = f"backline console (background sessions: {names}). /quit or Ctrl-D to leave."
    else:
        installed = available_backgrounds(manager)
        hint = (
            f"Installed:\n{installed}\nStart one with `backline console --background NAME`."
            if installed
            else "None is installed (`backline install PACKAGE` adds one)."
        )
        banner = (
            f"backline console: no background session is running. {hint}\n/quit or Ctrl-D to leave."
        )

    async def main() -> None:
        async with hosting_voice_channel(session, "backline console"):
            await run_console(
                session,
                agent,
                rich=False if plain else None,
                banner=banner,
                log_path=log_path,
                llm=options.llm,
            )

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during close
        pass


class _ErrorPrinter:
    """Prints each session error as one line, the details being in the log file."""

    def __init__(self, log_path: os.PathLike[str] | str | None, llm: str | None) -> None:
        self._where = f" (details: {log_path})" if log_path is not None else ""
        self._llm = llm

    def attach(self, session: Session[Any], emit: Callable[[str], None]) -> None:
        def on_error(ev: Any) -> None:
            emit(f"! {describe_error(ev.error, llm=self._llm)}{self._where}\n")

        session.on("error", on_error)


def _note_printer(view: ConsoleView, emit: Callable[[str], None]) -> Callable[[Any], None]:
    def on_message(ev: Any) -> None:
        if ev.silent:
            text = shorten(ev.content, NOTE_WIDTH)
            emit(f"  · {ev.background_id} (context only): {text}\n")

    return on_message


def _alert_printer(
    ring: Callable[[str], None], show: Callable[[str], None]
) -> Callable[[Any], None]:
    """A background finished, failed or asks something: the terminal's bell at once
    (even in the middle of a reply), and a marked line where lines go."""

    def on_alert(ev: Any) -> None:
        ring(BELL)
        show(alert_line(ev.text))

    return on_alert


async def _run_plain(
    session: Session[Any],
    agent: Agent,
    view: ConsoleView,
    stdin: TextIO,
    stdout: TextIO,
    banner: str | None,
    errors: _ErrorPrinter,
    limits: Limits,
    voice: ConsoleVoice | None,
) -> None:
    def emit(text: str) -> None:
        stdout.write(text)
        stdout.flush()

    errors.attach(session, emit)
    output = ConsoleOutput(view, emit, stream=True, speech=voice.speech if voice else None)
    session.output = output
    shown: dict[str, str] = {}
    started = False
    held: list[str] = []  # lines that arrived while a reply streamed on its own line

    def between_replies(text: str) -> None:
        if view.streaming:
            held.append(text)
        else:
            emit(text)

    def reply_done() -> None:
        while held:
            emit(held.pop(0))

    output.on_done = reply_done

    def status(_: Any = None) -> None:
        # A line each time a background's state reads differently, from the session's
        # start on; the agent's and the user's listening/thinking flips are left out
        # (the replies show them).
        if not started:
            return
        for bid, text in view.backgrounds.items():
            if shown.get(bid) != text:
                shown[bid] = text
                between_replies(f"[{bid}] {text}\n")

    def start_status() -> None:
        nonlocal started
        started = True
        status()

    for name in ("background_state", "background_status"):
        session.on(name, status)
    session.on("background_message", _note_printer(view, between_replies))
    session.on("background_alert", _alert_printer(emit, between_replies))
    if banner:
        emit(banner + "\n")
    warm_up_llm(session.llm)  # what its first request needs loads while the user types
    loop = asyncio.get_running_loop()
    # Room for the longest turn in UTF-8; a longer line is skipped, never buffered whole.
    reader = asyncio.StreamReader(limit=limits.max_user_turn_chars * _UTF8_MAX + 2)
    transport = None
    pumping = TaskScope("console stdin reader")
    if _watchable(stdin):
        with contextlib.suppress(ValueError, OSError, NotImplementedError):
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), stdin
            )
    if transport is None:
        # A regular file or /dev/null (the loop cannot watch them), or no loop support:
        # a thread reads the file into the same bounded reader.
        pumping.create_task(_pump(stdin, reader, loop), name="console stdin reader")

    async def read_line() -> str | _Overlong | None:
        return await _read_bounded_line(reader)

    try:
        await _converse(
            session,
            agent,
            read_line,
            emit,
            limits,
            started=start_status,
            finish_at_eof=not _is_terminal(stdin),
            voice=voice,
        )
    finally:
        if transport is not None:
            transport.close()
        await pumping.aclose(timeout=5.0)
        await output.aclose()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _watchable(stream: TextIO) -> bool:
    """Whether the event loop can watch ``stream`` (a pipe, a socket or a terminal)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


async def _pump(
    stream: TextIO, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop
) -> None:
    def read_all() -> None:
        try:
            fd = stream.fileno()
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except (AttributeError, OSError, ValueError):
            pass
        finally:
            loop.call_soon_threadsafe(reader.feed_eof)

    await asyncio.to_thread(read_all)


async def _run_rich(
    session: Session[Any],
    agent: Agent,
    view: ConsoleView,
    banner: str | None,
    errors: _ErrorPrinter,
    limits: Limits,
    voice: ConsoleVoice | None,
) -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import HTML
    from prompt_toolkit.patch_stdout import patch_stdout
    from prompt_toolkit.styles import Style

    def emit(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    prompt: PromptSession[str] = PromptSession()

    def toolbar() -> Any:
        width = prompt.app.output.get_size().columns
        live = view.live_reply
        lines = []
        if live:
            tail = " ".join(live.split())[-max(width - 9, 20) :]
            lines.append(f"<b>agent</b>: {_escape(tail)}▌")
        lines += [_escape(line) for line in view.status_lines(width)]
        return HTML("\n".join(lines))

    def redraw(_: Any = None) -> None:
        app = prompt.app
        if app.is_running:
            app.invalidate()

    output = ConsoleOutput(view, emit, stream=False, speech=voice.speech if voice else None)
    output.on_live = redraw
    session.output = output
    for name in STATUS_EVENTS:
        session.on(name, redraw)
    style = Style.from_dict({"bottom-toolbar": "noreverse"})
    with patch_stdout():
        errors.attach(session, emit)
        session.on("background_message", _note_printer(view, emit))
        session.on("background_alert", _alert_printer(emit, emit))
        if banner:
            emit(banner + "\n")

        def shown(_: object) -> None:
            # The first prompt is on the screen: what the model's first request needs
            # loads now, while the user types.
            prompt.app.after_render -= shown
            warm_up_llm(session.llm)

        prompt.app.after_render += shown

        keys = voice.key_bindings(redraw) if voice else None

        async def read_line() -> str | None:
            try:
                return await prompt.prompt_async(
                    "you> ",
                    bottom_toolbar=toolbar,
                    style=style,
                    refresh_interval=0.5,
                    key_bindings=keys,
                )
            except EOFError:
                return None

        try:
            await _converse(session, agent, read_line, emit, limits, voice=voice)
        finally:
            await output.aclose()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Overlong:
    """A line too long to buffer (it was skipped): its size in bytes."""

    def __init__(self, size: int) -> None:
        self.size = size


async def _read_bounded_line(reader: asyncio.StreamReader) -> str | _Overlong | None:
    """The next line (None at EOF); a line past the reader's limit is skipped whole
    (read and dropped piece by piece, never held) and reported as ``_Overlong``."""
    skipped = 0
    while True:
        try:
            raw = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:  # EOF
            raw = e.partial
            if not raw and not skipped:
                return None
        except asyncio.LimitOverrunError as e:
            skipped += len(await reader.readexactly(e.consumed))
            continue
        if skipped:
            return _Overlong(skipped + len(raw))
        return raw.decode(errors="replace")


def _too_long_message(size: str, limits: Limits) -> str:
    """What the console says about a line over ``limits.max_user_turn_chars``."""
    return (
        f"[not sent] that line has {size}; a turn can have at most "
        f"{limits.max_user_turn_chars:,} characters (Limits.max_user_turn_chars). Shorten it, or "
        "put long text in a file and tell the agent where it is.\n"
    )


async def _converse(
    session: Session[Any],
    agent: Agent,
    read_line: Callable[[], Awaitable[str | _Overlong | None]],
    emit: Callable[[str], None],
    limits: Limits,
    *,
    started: Callable[[], None] | None = None,
    finish_at_eof: bool = False,
    voice: ConsoleVoice | None = None,
) -> None:
    """Start, push each line as a user turn until EOF or a quit command, then close.

    With ``finish_at_eof`` (input from a file or a pipe, not a person: a script), each
    line is sent once the agent finished answering the one before (bounded), so no
    line barges in, and the end of the input lets the agent finish answering before
    the session closes.
    """
    try:
        await session.start(agent)
        if started is not None:
            started()
        if voice is not None:
            await voice.start(emit)
        while (line := await read_line()) is not None:
            if isinstance(line, _Overlong):
                emit(_too_long_message(f"about {line.size:,} bytes", limits))
                continue
            line = line.strip()
            if line in QUIT_COMMANDS:
                break
            if voice is not None and voice.command(line, emit):
                continue
            if len(line) > limits.max_user_turn_chars:
                emit(_too_long_message(f"{len(line):,} characters", limits))
            elif line:
                session.push_user_turn(line)
                if finish_at_eof:
                    await session.wait_for_idle(timeout=EOF_IDLE_TIMEOUT)
        if finish_at_eof:
            # Input from a file or a pipe: its end, or a quit command in it, lets the
            # agent finish answering what came before (bounded); a person's quit does not.
            if voice is not None:
                await voice.finished(EOF_IDLE_TIMEOUT)
            await session.wait_for_idle(timeout=EOF_IDLE_TIMEOUT)
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    finally:
        emit("closing…\n")
        if voice is not None:
            await voice.aclose()
        await session.aclose()
        await close_llm(session.llm)  # a realtime model's socket
        emit("bye\n")
