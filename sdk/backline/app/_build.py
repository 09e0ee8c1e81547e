"""Building a session from the user's options and the loaded plugins.

``prepare_session`` is what every front end does: ``check_options`` (names and
combinations), ``preflight`` (credentials), then ``build_session`` (the LLM, the
agent, the backgrounds, the plugins' tools, the MCP servers, the conversation
log). Each raises a click exception that says what was wrong and which option to
change (a click command shows it as a usage error, exit status 2, or an error,
exit status 1).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from ..keys import KeyStoreError, get_key
from ..llm.llm import LLMError
from ..plugins import PluginManager, UnknownNameError
from ._backgrounds import chosen_backgrounds
from ._options import SessionOptions
from ._plugin_options import check_plugin_options

if TYPE_CHECKING:
    from ..background.definition import BackgroundDefinition
    from ..mcp import MCPServerConfig
    from ..session import Session
    from ..voice.agent import Agent

DEFAULT_INSTRUCTIONS = (
    "You are a friendly, concise voice assistant. Background sessions do long-running "
    "work for the user: give them tasks and corrections with backline_send, check on "
    "them with backline_state when the user asks how things are going, stop one's "
    "current work with backline_stop when the user asks to stop it, and relay their "
    "updates briefly and naturally."
)
"""The default voice agent's instructions (before each chosen background's guidance)."""


def check_options(manager: PluginManager, options: SessionOptions) -> list[BackgroundDefinition]:
    """Check the user's choices (names, combinations, plugins' options, the ``.mcp.json``
    file) before anything else, credentials included; returns the chosen background
    definitions (``--background ID[:NAME][=VALUE]``: ``chosen_backgrounds``). A
    plugin's option for a background that is not chosen, or with a value it does not
    take, is a usage error (``check_plugin_options``)."""
    if options.agent is not None and options.instructions is not None:
        raise click.UsageError("use --instructions or --agent, not both")
    backgrounds = chosen_backgrounds(manager, options.backgrounds)
    if options.llm not in manager.llm_names():
        try:
            manager.llm(options.llm)
        except UnknownNameError as e:
            raise click.BadParameter(str(e), param_hint="'--llm'") from None
    check_plugin_options(manager, options)
    _mcp_servers(options)
    return backgrounds


def preflight(options: SessionOptions, environ: Mapping[str, str] | None = None) -> None:
    """Fail early, with what to do, when the chosen LLM cannot work (today: Anthropic's
    key, from ``environ`` (default ``os.environ``) or the key store)."""
    env = os.environ if environ is None else environ
    if options.llm != "anthropic" or env.get("ANTHROPIC_AUTH_TOKEN"):
        return
    try:
        key = get_key("ANTHROPIC_API_KEY", env)
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if not key:
        raise click.ClickException(
            "ANTHROPIC_API_KEY is not set, so the voice agent cannot reach Claude. "
            "Set it (export ANTHROPIC_API_KEY=sk-ant-...) or store it with `backline keys "
            "set ANTHROPIC_API_KEY`, or choose another LLM with --llm (see `backline "
            "plugins --all`)."
        )


def build_session(
    manager: PluginManager,
    options: SessionOptions,
    *,
    front_end: str | None = None,
    log_options: Mapping[str, Any] | None = None,
    **session_kwargs: Any,
) -> tuple[Session[Any], Agent]:
    """Build an unstarted ``Session`` and its first ``Agent`` from ``options``.

    The session gets every plugin tool, the chosen background sessions, the
    chosen LLM and the ``--mcp-config`` servers; ``session_kwargs`` (``output=...``,
    ...) go to ``Session``. The manager is activated, so plugins observe the
    session's start and close. Unless ``options.log`` is false, the session is
    recorded in the conversation log as ``front_end`` (default: the running click
    command's name), with ``log_options`` (a front end's own options, such as its
    speech engines) in its session row. Start it with ``async with session: await
    session.start(agent)``.
    """
    from ..session import Session

    backgrounds = check_options(manager, options)
    llm_options: dict[str, Any] = {} if options.model is None else {"model": options.model}
    try:
        llm = manager.llm(options.llm, **llm_options)
    except UnknownNameError as e:
        raise click.BadParameter(str(e), param_hint="'--llm'") from None
    except (LLMError, KeyStoreError) as e:  # the factory says what is missing (a key, a model)
        raise click.ClickException(str(e)) from None
    agent = make_agent(options, backgrounds)
    mcp_servers = _mcp_servers(options)
    manager.activate()
    session_kwargs.setdefault("user_away_signal", options.user_away_signal)
    session: Session[Any] = Session(
        llm,
        tools=manager.tools(),
        background=backgrounds,
        mcp_servers=mcp_servers,
        **session_kwargs,
    )
    if options.log:
        attach_conversation_log(
            session, options, agent, front_end=front_end, extra_options=log_options
        )
    return session, agent


def prepare_session(
    manager: PluginManager,
    options: SessionOptions,
    *,
    front_end: str | None = None,
    log_options: Mapping[str, Any] | None = None,
    **session_kwargs: Any,
) -> tuple[Session[Any], Agent]:
    """What every front end does: check the options, then the credentials, then build
    (``check_options``, ``preflight``, ``build_session``)."""
    check_options(manager, options)
    preflight(options)
    return build_session(
        manager, options, front_end=front_end, log_options=log_options, **session_kwargs
    )


def attach_conversation_log(
    session: Session[Any],
    options: SessionOptions,
    agent: Agent,
    *,
    front_end: str | None = None,
    extra_options: Mapping[str, Any] | None = None,
) -> bool:
    """Record ``session`` in the conversation log (``backline logs``) unless
    ``BACKLINE_LOG=0``; ``front_end`` names it there (default: the running click
    command's name, ``console`` for ``backline console``). The session row keeps the
    options that shape its behaviour (``SessionOptions.as_dict()``, and
    ``extra_options``: a front end's own, such as its speech engines). True if it is
    recorded."""
    from ..logs import attach_log, logging_enabled

    if not logging_enabled():
        return False
    if front_end is None:
        ctx = click.get_current_context(silent=True)
        front_end = ctx.command_path.partition(" ")[2] or ctx.command_path if ctx else None
    attach_log(
        session,
        front_end=front_end,
        llm=options.llm,
        agent=agent.label,
        backgrounds=session.background.sorted_ids() if session.background else (),
        options={**options.as_dict(), **(extra_options or {})},
    )
    return True


def make_agent(options: SessionOptions, backgrounds: Sequence[BackgroundDefinition]) -> Agent:
    """The first agent: ``Agent(instructions)`` (``default_instructions`` without them),
    or the ``module:Class`` of ``options.agent``, built with no arguments."""
    from ..voice.agent import Agent

    if options.agent is None:
        return Agent(options.instructions or default_instructions(backgrounds))
    module_name, _, attr = options.agent.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected MODULE:CLASS", param_hint="'--agent'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise click.BadParameter(
            f"cannot load {options.agent}: {e}", param_hint="'--agent'"
        ) from None
    agent = target() if callable(target) and not isinstance(target, Agent) else target
    if not isinstance(agent, Agent):
        raise click.BadParameter(
            f"{options.agent} is not an Agent (got {type(agent).__name__})",
            param_hint="'--agent'",
        )
    return agent


def default_instructions(backgrounds: Sequence[BackgroundDefinition]) -> str:
    """The default voice agent's instructions, with each background's own guidance (once
    each), and, when several run, who they are and how the user names them."""
    parts = [DEFAULT_INSTRUCTIONS]
    if len(backgrounds) > 1:
        lines = [f"- {d.id}: {_first_sentence(d.description)}" for d in backgrounds]
        parts.append(
            "Several background sessions run, each with its name (its id in your tools). "
            'The user addresses one by its name ("tell the api agent to stop"): use that '
            "id; when it is not clear which one the user means, ask. Their updates reach "
            "you one at a time: say whose update it is, by its name, first.\n" + "\n".join(lines)
        )
    for guidance in dict.fromkeys(d.voice_instructions for d in backgrounds):
        if guidance:
            parts.append(guidance)
    return "\n\n".join(parts)


def _first_sentence(description: str, limit: int = 90) -> str:
    text = " ".join((description or "").split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first[: limit - 1] + "…" if len(first) > limit else first


def available_backgrounds(manager: PluginManager) -> str:
    """A line per installed background (id and the first sentence of its description),
    for a front end to show when none was chosen; empty when none is installed. A
    background that takes a value says what it sets (``(=DIR: the folder ...)``)."""
    lines = []
    for definition in manager.background_definitions():
        line = f"  {definition.id}: {_first_sentence(definition.description)}".rstrip(": ")
        if definition.instance_value is not None:
            line += f" (={definition.instance_value})"
        lines.append(line)
    return "\n".join(lines)


def _mcp_servers(options: SessionOptions) -> list[MCPServerConfig]:
    """The servers of ``--mcp-config`` (a clear usage error when the file is wrong)."""
    if options.mcp_config is None:
        return []
    from ..mcp import load_mcp_config

    try:
        return load_mcp_config(options.mcp_config)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--mcp-config'") from None
