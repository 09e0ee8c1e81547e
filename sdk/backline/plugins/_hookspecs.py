"""The hook specifications of backline plugins (pluggy project ``backline``).

A plugin is a module (or any object) with functions marked ``@backline.hookimpl``
whose names are hooks below. Each implementation may take any subset of a
hook's arguments, by name.

Stability: the arguments listed here are stable. A new argument arrives with a
default, so an implementation written today keeps working; the ``register``
callbacks likewise only ever gain keyword arguments with defaults.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT_NAME = "backline"
"""The pluggy project name, and the entry-point group plugins are found in."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

REGISTRATION_HOOKS = (
    "register_hookspecs",
    "register_background_sessions",
    "register_tools",
    "register_llms",
    "register_options",
    "register_stt",
    "register_tts",
    "register_vad",
)
"""Hooks called once per plugin when it loads (in this order, then the registration
hooks plugins added); one that raises fails the plugin."""

OBSERVER_HOOKS = ("session_started", "session_closed")
"""Hooks called at each session start and close; one that raises is only logged."""


@hookspec
def register_hookspecs(register: Any) -> None:
    """Add hooks of this plugin's own, for other plugins to implement: call
    ``register(hookspecs, kinds=[...])``.

    ``hookspecs`` is a module or class whose functions are marked
    ``@backline.plugins.hookspec``. Each ``RegistrationKind`` in ``kinds`` makes one of them
    a registration hook: every plugin implementing it is called once, when it
    loads, with a ``register`` callback, and what it registers is listed, checked
    for clashes and looked up like backline's own kinds. Runs before any
    registration hook, so plugins that implement these hooks may load before or
    after this one.
    """


@hookspec
def register_background_sessions(register: Any) -> None:
    """Register background sessions: call ``register(definition)`` for each
    ``BackgroundDefinition`` (built with ``@backline.background``)."""


@hookspec
def register_tools(register: Any) -> None:
    """Register function tools for the voice agent: call ``register(tool)`` with a
    ``FunctionTool`` (``@backline.function_tool``) or a plain function (its type
    hints and docstring become the schema)."""


@hookspec
def register_llms(register: Any) -> None:
    """Register named LLM factories: call ``register(name, factory, description="")``.

    ``factory(**options)`` returns an ``LLM``; the only option the CLI passes is
    ``model`` (a model name, or absent). Import heavy client libraries inside the
    factory, not at module level: plugins load on every ``backline`` start.
    """


@hookspec
def register_options(register: Any) -> None:
    """Add options to every front-end command (``backline console``, ``backline web``,
    and front ends from plugins): call
    ``register("--flag", envvar="MY_PLUGIN_FLAG", help="...", **click_option_kwargs)``.

    A value given on the command line is exported to ``envvar`` before the session
    is built; the plugin reads its configuration from the environment when a
    session starts (so the variable works without the flag too).
    """


@hookspec
def register_stt(register: Any) -> None:
    """Register speech-to-text engines: call ``register(name, factory, description="",
    local=True, rank=0, unavailable=None, models=(), default_model=None)``.

    ``factory(**options)`` returns a ``backline.speech.SpeechToText``; options are
    ``model`` and ``language`` (only those given). ``unavailable()`` says in one
    sentence what stops the engine here (a missing package or program), or returns
    None. ``models``: names, or ``backline.speech.ModelSpec`` for models fetched on
    first use. Among local engines that are ready, the highest ``rank`` is the default.
    Import the engine's library inside the factory.
    """


@hookspec
def register_tts(register: Any) -> None:
    """Register text-to-speech engines, like ``register_stt`` (a factory returning a
    ``backline.speech.TextToSpeech``; options ``model``, ``voice``, ``language``; also
    ``voices=`` and ``default_voice=``)."""


@hookspec
def register_vad(register: Any) -> None:
    """Register voice-activity detectors, like ``register_stt`` (a factory returning a
    ``backline.speech.VoiceActivityDetector``; option ``model``)."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add ``backline`` subcommands: ``cli`` is the root ``click.Group``
    (``@cli.command()`` / ``cli.add_command``)."""


@hookspec
def session_started(session: Any) -> None:
    """A ``Session`` started (its agent and background sessions are running).

    An observer: it runs synchronously, must not block, and one that raises is
    logged and never stops the session.
    """


@hookspec
def session_closed(session: Any) -> None:
    """A started ``Session`` closed. An observer, like ``session_started``."""
