"""``backline livekit console --text``: LiveKit's console, text only, with no audio at all.

LiveKit's own console (``livekit.agents.cli._legacy._run_console``) imports
``sounddevice`` even in text mode (to check the audio devices), so on a machine
without PortAudio it fails with a traceback before the first prompt, and Ctrl-T
switches it to audio mode, which opens the microphone. Here the same console
pieces run text only: LiveKit's console object, its worker thread running the
entrypoint as a fake job, its text prompt and transcript; audio is never
touched, and Ctrl-T says that audio is off. The job's ``AgentSession`` has no
STT, TTS or VAD (``WorkerConfig.text``), so no provider and no LiveKit key is
needed.

These are private pieces of ``livekit-agents`` 1.8 (pinned ``<1.9``), used here
and nowhere else; ``tests/plugins/livekit/test_console.py`` runs them.
"""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livekit.agents import AgentServer

AUDIO_OFF = "Audio is off: this console was started with --text (leave it out to talk)."


def run_text_console(server: AgentServer, *, log_level: str = "WARN") -> None:
    """Run ``server``'s entrypoint as a console job, in text mode, until Ctrl-C."""
    from livekit.agents.cli import _legacy
    from livekit.agents.cli import cli as lk_cli

    console: Any = _legacy.AgentsConsole.get_instance()
    lk_cli.AgentsConsole._instance = console  # what AgentSession consults (as LiveKit does)
    console.console_mode = "text"
    console.enabled = True
    console.record = False
    console_owns_logging()
    _legacy._configure_logger(console, log_level)
    console.print("Text mode: type to talk, Ctrl-C to leave.", tag="backline")

    tty = _TerminalSettings()
    stopping = False
    worker_done = False

    def worker_stopped() -> None:  # the worker thread, when the server has stopped
        nonlocal worker_done
        worker_done = True
        signal.raise_signal(signal.SIGTERM)  # wakes the prompt up

    def on_signal(sig: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:  # later signals: the close is already under way
            stopping = True
            raise _legacy._ExitCli()

    for sig in _legacy.HANDLED_SIGNALS:
        signal.signal(sig, on_signal)
    worker = _legacy._ConsoleWorker(server=server, shutdown_cb=worker_stopped)
    worker.start()
    try:
        console.wait_for_io_acquisition()
        while True:
            try:
                _legacy._text_mode(console)
                return  # the prompt was left (Ctrl-C read as a key)
            except _legacy._ToggleMode:
                console.print(AUDIO_OFF, tag="backline")
    except _legacy._ExitCli:
        pass
    finally:
        if not worker_done:
            worker.shutdown()
        worker.join()
        tty.restore()


def console_owns_logging() -> None:
    """Take the terminal's log handlers off the root logger (the ``backline`` command
    puts one there): LiveKit's console prints log records its own way, once."""
    root = logging.getLogger()
    terminal = (sys.stderr, sys.stdout)
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and handler.stream in terminal:
            root.removeHandler(handler)


class _TerminalSettings:
    """The terminal's settings at start, put back at the end (the prompt reads raw keys)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._saved: Any = None
        try:
            import termios

            self._fd = sys.stdin.fileno()
            self._saved = termios.tcgetattr(self._fd)
        except Exception:  # not a terminal, or no termios (Windows)
            self._fd = None

    def restore(self) -> None:
        if self._fd is None:
            return
        try:
            import termios

            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
        except Exception:
            pass
