"""backline's own registration kinds: background sessions, tools, LLMs, front-end options.

Each is a ``RegistrationKind`` like those plugins add (``register_hookspecs``):
the manager treats them all alike, backline's first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ..background.definition import BackgroundDefinition
from ..background.tools import RESERVED_TOOL_NAMES
from ..llm.llm import LLM
from ..llm.tools import FunctionTool, function_tool
from ._kinds import RegistrationKind, check_name
from ._options import RESERVED_OPTIONS, Choices, OptionEntry, make_option

LLMFactory: TypeAlias = Callable[..., LLM]
"""``factory(**options) -> LLM``: what ``register_llms`` registers under a name."""


class RegisterBackground(Protocol):
    """The ``register`` argument of ``register_background_sessions``."""

    def __call__(self, definition: BackgroundDefinition) -> None: ...


class RegisterTool(Protocol):
    """The ``register`` argument of ``register_tools``."""

    def __call__(self, tool: FunctionTool | Callable[..., Any]) -> None: ...


class RegisterOption(Protocol):
    """The ``register`` argument of ``register_options``."""

    def __call__(
        self,
        *param_decls: str,
        envvar: str,
        help: str,
        background: str | None = None,
        choices: Choices | None = None,
        validate: Callable[[str], object] | None = None,
        **kwargs: Any,
    ) -> None: ...


class RegisterLLM(Protocol):
    """The ``register`` argument of ``register_llms``."""

    def __call__(
        self, name: str, factory: Callable[..., LLM], *, description: str = ""
    ) -> None: ...


@dataclass(frozen=True)
class LLMEntry:
    """A named LLM factory and the plugin that registered it."""

    name: str
    factory: Callable[..., LLM]
    description: str
    plugin: str


def _background(plugin: str, definition: BackgroundDefinition) -> tuple[str, BackgroundDefinition]:
    """Register a ``BackgroundDefinition`` (built with ``@backline.background``)."""
    if not isinstance(definition, BackgroundDefinition):
        raise TypeError(
            "register_background_sessions: expected a BackgroundDefinition "
            f"(use @backline.background), got {type(definition).__name__}"
        )
    return definition.id, definition


def _tool(plugin: str, tool: FunctionTool | Callable[..., Any]) -> tuple[str, FunctionTool]:
    """Register a ``FunctionTool`` or a plain function (wrapped with ``function_tool``)."""
    if not isinstance(tool, FunctionTool):
        if not callable(tool) or inspect.isclass(tool):
            raise TypeError(
                "register_tools: expected a FunctionTool (@backline.function_tool) or a "
                f"function, got {type(tool).__name__}"
            )
        tool = function_tool(tool)
    return tool.name, tool


def _llm(
    plugin: str, name: str, factory: Callable[..., LLM], *, description: str = ""
) -> tuple[str, LLMEntry]:
    """Register an LLM factory under ``name``: ``factory(**options) -> LLM``."""
    check_name("register_llms", "LLM name", name)
    if not callable(factory):
        raise TypeError(f"register_llms: the factory for '{name}' must be callable")
    return name, LLMEntry(name, factory, description, plugin)


def _option(
    plugin: str,
    *param_decls: str,
    envvar: str,
    help: str,
    background: str | None = None,
    choices: Choices | None = None,
    validate: Callable[[str], object] | None = None,
    **kwargs: Any,
) -> tuple[str, OptionEntry]:
    """Add a front-end option: ``register("--depth", envvar="X_DEPTH", help="...")``.

    The option joins ``backline console``, ``backline web`` and every other
    front end; a value given on the command line is exported to ``envvar``.
    ``background="my_bg"``: the option configures that background session, and is a
    usage error when it is not chosen. ``choices`` (names, or ``choices(manager)``
    returning them) and ``validate(value)`` (raising ``ValueError`` saying what is
    wrong) check the value before a session is built. Other keywords go to
    ``click.Option`` (``type``, ``is_flag``, ``metavar``, ``show_default`` ...),
    except ``default``, ``multiple`` and ``callback``.
    """
    entry = make_option(
        plugin,
        param_decls,
        envvar=envvar,
        help=help,
        background=background,
        choices=choices,
        validate=validate,
        **kwargs,
    )
    return entry.flag, entry


def _reserved_tool(name: str, tool: FunctionTool) -> str | None:
    return name if name in RESERVED_TOOL_NAMES else None


def _reserved_option(flag: str, entry: OptionEntry) -> str | None:
    return next(
        (o for o in (*entry.option.opts, *entry.option.secondary_opts) if o in RESERVED_OPTIONS),
        None,
    )


BACKGROUNDS: RegistrationKind[BackgroundDefinition] = RegistrationKind(
    "background",
    "register_background_sessions",
    _background,
    label="background session id",
    key="backgrounds",
)
TOOLS: RegistrationKind[FunctionTool] = RegistrationKind(
    "tool", "register_tools", _tool, label="tool name", reserved=_reserved_tool
)
LLMS: RegistrationKind[LLMEntry] = RegistrationKind("llm", "register_llms", _llm, label="LLM name")
OPTIONS: RegistrationKind[OptionEntry] = RegistrationKind(
    "option", "register_options", _option, label="front-end option", reserved=_reserved_option
)

CORE_KINDS: tuple[RegistrationKind[Any], ...] = (BACKGROUNDS, TOOLS, LLMS, OPTIONS)
"""backline's kinds, in the order their hooks run when a plugin loads."""
