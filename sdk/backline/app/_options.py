"""The session options: what the user chose for the session a front end builds.

``@session_options`` adds them to a click command (``--background``, ``--llm``,
``--model``, ``--instructions``, ``--agent``, ``--log-file``, ``--no-log``,
``--mcp-config``, ``--user-away-signal``), in a "Session" section of its help, passes them as one
``SessionOptions`` value and marks the command as a front end, so options plugins
register (``register_options``) are added to it too, a section per plugin.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from ..plugins import FRONT_END_MARK, GIVEN_OPTIONS_KEY, OptionSection

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_LLM = "anthropic"
"""The voice LLM when neither ``--llm`` nor ``$BACKLINE_LLM`` names one."""


@dataclass(frozen=True)
class SessionOptions:
    """What a front end's options say about the session to build.

    ``backgrounds``: the backgrounds to run, each ``ID[:NAME][=VALUE]`` (none unless
    named: a background can change files, so the user chooses; ``NAME`` and ``VALUE``
    make an instance: ``BackgroundDefinition.instance``); ``llm``: an LLM name from
    ``register_llms`` and ``model`` its model; the agent is ``Agent(instructions)`` (the default
    instructions without them) or, with ``agent`` (``module:Class``), that class.
    ``log``: write the conversation to the conversation log (``--no-log`` turns it
    off; so does ``BACKLINE_LOG=0``); ``log_file``: where error details go.
    ``mcp_config``: a ``.mcp.json`` file whose MCP servers' tools the voice agent gets.
    ``plugin_options``: the plugins' options given on the command line (flag ->
    value), checked against the chosen backgrounds by ``check_options``.
    ``user_away_signal``: what holds "away" off, ``"audio"`` (any speech detected) or
    ``"transcript"`` (only words recognised: noise does not); ``--user-away-signal``.
    """

    backgrounds: tuple[str, ...] = ()
    llm: str = DEFAULT_LLM
    model: str | None = None
    instructions: str | None = None
    agent: str | None = None
    log_file: str | None = None
    log: bool = True
    mcp_config: str | None = None
    plugin_options: Mapping[str, Any] = field(default_factory=dict)
    user_away_signal: str = "audio"

    def as_dict(self) -> dict[str, Any]:
        """The options that shape the session's behaviour, as the conversation log's
        session row records them (names and defaults included, so a reader sees the
        rule that applied)."""
        return {"user_away_signal": self.user_away_signal}


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
        user_away_signal: str,
        **kwargs: Any,
    ) -> Any:
        ctx = click.get_current_context(silent=True)
        given = dict(ctx.meta.get(GIVEN_OPTIONS_KEY, {})) if ctx is not None else {}
        options = SessionOptions(
            backgrounds=tuple(background),
            llm=llm,
            model=model,
            instructions=instructions,
            agent=agent,
            log_file=log_file,
            log=not no_log,
            mcp_config=mcp_config,
            plugin_options=given,
            user_away_signal=user_away_signal,
        )
        return command(*args, session_options=options, **kwargs)

    setattr(wrapper, FRONT_END_MARK, True)
    # Parameters are listed in the order given: the section's title, then its options.
    params: list[click.Parameter] = getattr(wrapper, "__click_params__", [])
    wrapper.__click_params__ = params  # type: ignore[attr-defined]
    params.extend(reversed([SESSION_SECTION.title(), *_session_params()]))
    return wrapper  # type: ignore[return-value]


SESSION_SECTION = OptionSection("Session", help="what the conversation runs")
"""The help section of the session options."""


def _session_params() -> list[click.Option]:
    option = SESSION_SECTION.option
    return [
        option(
            "--background",
            "-b",
            multiple=True,
            metavar="ID[:NAME][=VALUE]",
            help="A background session to run (repeatable). Without it none runs; "
            "`backline plugins` lists those installed. Several of one kind: give each a "
            "NAME and its VALUE (claude_code:api=./services/api: Claude Code in that "
            "folder, called api).",
        ),
        option(
            "--llm",
            default=lambda: os.environ.get("BACKLINE_LLM", DEFAULT_LLM),
            show_default="anthropic, or $BACKLINE_LLM",
            metavar="NAME",
            help="The voice agent's LLM (a name a plugin registered; `backline models` "
            "lists them).",
        ),
        option(
            "--model",
            "-m",
            metavar="MODEL",
            help="The model of that LLM (default: the LLM's own; `backline models`).",
        ),
        option("--instructions", metavar="TEXT", help="The voice agent's instructions."),
        option(
            "--agent",
            metavar="MODULE:CLASS",
            help="Use this Agent class (built with no arguments) instead of --instructions.",
        ),
        option(
            "--log-file",
            metavar="PATH",
            envvar="BACKLINE_LOG_FILE",
            help="Where error details go (default: ~/.local/state/backline/backline.log).",
        ),
        option(
            "--no-log",
            is_flag=True,
            help="Do not write this conversation to the conversation log (`backline logs`).",
        ),
        option(
            "--mcp-config",
            metavar="PATH",
            help="A .mcp.json file: its MCP servers' tools become the voice agent's "
            "(<server>__<tool>). See docs/mcp.md.",
        ),
        option(
            "--user-away-signal",
            type=click.Choice(["audio", "transcript"]),
            default="audio",
            show_default=True,
            help="What holds off 'away' when the user is quiet: any speech heard (audio), "
            "or only recognised words (transcript: noise does not).",
        ),
    ]
