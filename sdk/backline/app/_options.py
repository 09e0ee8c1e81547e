"""The session options: what the user chose for the session a front end builds.

``@session_options`` adds them to a click command (``--background``, ``--llm``,
``--model``, ``--instructions``, ``--agent``, ``--log-file``, ``--no-log``,
``--mcp-config``), passes them as one ``SessionOptions`` value and marks the
command as a front end, so options plugins register (``register_options``) are
added to it too.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ..plugins import FRONT_END_MARK

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LLM = "anthropic"
"""The voice LLM when neither ``--llm`` nor ``$BACKLINE_LLM`` names one."""


@dataclass(frozen=True)
class SessionOptions:
    """What a front end's options say about the session to build.

    ``backgrounds``: background ids to run (none unless named: a background can
    change files, so the user chooses); ``llm``: an LLM name from ``register_llms``
    and ``model`` its model; the agent is ``Agent(instructions)`` (the default
    instructions without them) or, with ``agent`` (``module:Class``), that class.
    ``log``: write the conversation to the conversation log (``--no-log`` turns it
    off; so does ``BACKLINE_LOG=0``); ``log_file``: where error details go.
    ``mcp_config``: a ``.mcp.json`` file whose MCP servers' tools the voice agent gets.
    """

    backgrounds: tuple[str, ...] = ()
    llm: str = DEFAULT_LLM
    model: str | None = None
    instructions: str | None = None
    agent: str | None = None
    log_file: str | None = None
    log: bool = True
    mcp_config: str | None = None


def session_options(command: F) -> F:
    """Add the session options to a click command; it receives ``session_options=``
    (a ``SessionOptions``) instead of the separate flags.

    The command becomes a front end: options plugins register with
    ``register_options`` are added to it when plugins load.
    """

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        background: tuple[str, ...],
        llm: str,
        model: str | None,
        instructions: str | None,
        agent: str | None,
        log_file: str | None,
        no_log: bool,
        mcp_config: str | None,
        **kwargs: Any,
    ) -> Any:
        options = SessionOptions(
            backgrounds=tuple(background),
            llm=llm,
            model=model,
            instructions=instructions,
            agent=agent,
            log_file=log_file,
            log=not no_log,
            mcp_config=mcp_config,
        )
        return command(*args, session_options=options, **kwargs)

    setattr(wrapper, FRONT_END_MARK, True)
    result: Callable[..., Any] = wrapper
    for decorate in reversed(_OPTIONS):
        result = decorate(result)
    return result  # type: ignore[return-value]


_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option(
        "--background",
        "-b",
        multiple=True,
        metavar="NAME",
        help="A background session to run (repeatable). Without it none runs; "
        "`backline plugins` lists those installed.",
    ),
    click.option(
        "--llm",
        default=lambda: os.environ.get("BACKLINE_LLM", DEFAULT_LLM),
        show_default="anthropic, or $BACKLINE_LLM",
        metavar="NAME",
        help="The LLM to use (a name registered by a plugin).",
    ),
    click.option("--model", "-m", metavar="MODEL", help="The model name for that LLM."),
    click.option("--instructions", metavar="TEXT", help="Instructions of the voice agent."),
    click.option(
        "--agent",
        metavar="MODULE:CLASS",
        help="Use this Agent class (built with no arguments) instead of --instructions.",
    ),
    click.option(
        "--log-file",
        metavar="PATH",
        envvar="BACKLINE_LOG_FILE",
        help="Where error details go (default: ~/.local/state/backline/backline.log).",
    ),
    click.option(
        "--no-log",
        is_flag=True,
        help="Do not write this conversation to the conversation log (`backline logs`).",
    ),
    click.option(
        "--mcp-config",
        metavar="PATH",
        help="A .mcp.json file: its MCP servers' tools become the voice agent's "
        "(<server>__<tool>). See docs/mcp.md.",
    ),
]
