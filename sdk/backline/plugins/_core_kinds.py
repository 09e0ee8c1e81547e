"""backline's own registration kinds: background sessions, tools, LLMs, front-end options,
speech engines (``_speech_kinds``).

Each is a ``RegistrationKind`` like those plugins add (``register_hookspecs``):
the manager treats them all alike, backline's first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from ..background.definition import BackgroundDefinition
from ..background.tools import RESERVED_TOOL_NAMES
from ..llm.llm import LLM
from ..llm.tools import FunctionTool, function_tool
from ._kinds import RegistrationKind, check_name
from ._options import RESERVED_OPTIONS, Choices, OptionEntry, make_option
from ._speech_kinds import STT, TTS, VAD

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


ModelNames: TypeAlias = Sequence[str] | Callable[[], Iterable[str]]
"""The models an LLM knows: names, or a function returning them (called when they are
listed, so it may read the configuration or import the provider's package)."""


class RegisterLLM(Protocol):
    """The ``register`` argument of ``register_llms``."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., LLM],
        *,
        description: str = "",
        models: ModelNames = (),
        default_model: str | Callable[[], str | None] | None = None,
        speaks: bool = False,
    ) -> None: ...


@dataclass(frozen=True)
class LLMEntry:
    """A named LLM factory and the plugin that registered it.

    ``models``: the model names it knows (``known_models()``); ``default_model``: the
    one it uses when none is named (``default()``), as configured now. Both are for
    listing (``backline models``); the factory still decides. ``speaks``: its LLMs hear
    and speak themselves (``backline.speech.SpeakingModel``): a voice front end needs
    no speech-to-text engine for them.
    """

    name: str
    factory: Callable[..., LLM]
    description: str
    plugin: str
    models: ModelNames = ()
    default_model: str | Callable[[], str | None] | None = None
    speaks: bool = False

    def known_models(self) -> list[str]:
        """The models it knows, the default first (when it declares one)."""
        names = list(self.models() if callable(self.models) else self.models)
        default = self.default()
        if default is not None:
            names = [default, *(n for n in names if n != default)]
        return list(dict.fromkeys(str(n) for n in names))

    def default(self) -> str | None:
        """The model it uses when none is named, or None (it needs one)."""
        found = self.default_model() if callable(self.default_model) else self.default_model
        return str(found) if found else None


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
    plugin: str,
    name: str,
    factory: Callable[..., LLM],
    *,
    description: str = "",
    models: ModelNames = (),
    default_model: str | Callable[[], str | None] | None = None,
    speaks: bool = False,
) -> tuple[str, LLMEntry]:
    """Register an LLM factory under ``name``: ``factory(**options) -> LLM``.

    ``models``: the model names it knows (a list, or a function returning one, called
    only when models are listed); ``default_model``: the model it uses when none is
    named (a name, or a function returning the configured one, or None). ``backline
    models`` lists them. ``speaks=True``: the factory's LLMs are ``SpeakingModel``s (a
    realtime model with audio): voice front ends give them the user's voice.
    """
    check_name("register_llms", "LLM name", name)
    if not callable(factory):
        raise TypeError(f"register_llms: the factory for '{name}' must be callable")
    if not callable(models):
        if isinstance(models, str) or not all(isinstance(m, str) for m in models):
            raise TypeError(f"register_llms: models for '{name}' must be names, or a function")
        models = tuple(models)
    if default_model is not None and not (
        callable(default_model) or isinstance(default_model, str)
    ):
        raise TypeError(f"register_llms: default_model for '{name}' must be a name, or a function")
    return name, LLMEntry(
        name, factory, description, plugin, models, default_model, speaks=bool(speaks)
    )


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

CORE_KINDS: tuple[RegistrationKind[Any], ...] = (BACKGROUNDS, TOOLS, LLMS, OPTIONS, STT, TTS, VAD)
"""backline's kinds, in the order their hooks run when a plugin loads."""
