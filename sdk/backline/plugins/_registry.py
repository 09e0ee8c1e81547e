"""What plugins registered: per-plugin records, the shared registry, and clashes.

A plugin's registrations are collected into a ``Staged`` batch first and
committed to the ``Registry`` all at once, or not at all: a clash or a bad item
fails the whole plugin and leaves the registry as it was.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from ..background.definition import BackgroundDefinition
from ..background.tools import RESERVED_TOOL_NAMES
from ..llm.llm import LLM
from ..llm.tools import FunctionTool, function_tool
from ._options import OptionEntry, make_option
from ._search import SearchProviderEntry, SearchProviderFactory

PluginStatus: TypeAlias = Literal["loaded", "failed", "disabled"]
Kind: TypeAlias = Literal[
    "background", "tool", "llm", "command", "option", "search_provider", "plugin"
]

RESERVED_OWNER = "backline (reserved)"
"""The owner named in a clash with a reserved tool name."""

KIND_LABELS: dict[str, str] = {
    "background": "background session id",
    "tool": "tool name",
    "llm": "LLM name",
    "command": "command",
    "option": "front-end option",
    "search_provider": "search provider",
    "plugin": "plugin name",
}

RESERVED_OPTIONS = frozenset(
    {
        "--background",
        "-b",
        "--llm",
        "--model",
        "-m",
        "--instructions",
        "--agent",
        "--no-log",
        "--log-file",
        "--mcp-config",
        "--help",
    }
)
"""Flags the front ends own (``session_options``): a plugin cannot register them."""

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

    def __call__(self, *param_decls: str, envvar: str, help: str, **kwargs: Any) -> None: ...


class RegisterLLM(Protocol):
    """The ``register`` argument of ``register_llms``."""

    def __call__(
        self, name: str, factory: Callable[..., LLM], *, description: str = ""
    ) -> None: ...


@dataclass(frozen=True)
class Clash:
    """Two plugins registered the same name (or one took a reserved name).

    ``first`` holds the name; ``second`` was refused (and failed as a whole).
    """

    kind: Kind
    name: str
    first: str
    second: str

    @property
    def message(self) -> str:
        label = KIND_LABELS[self.kind]
        if self.first == RESERVED_OWNER:
            return (
                f"{label} '{self.name}' is reserved by backline; '{self.second}' "
                f"cannot register it (clash with {RESERVED_OWNER})"
            )
        if self.first == self.second:
            return f"{label} '{self.name}' is registered twice by '{self.first}'"
        return (
            f"{label} '{self.name}' is registered by both '{self.first}' and "
            f"'{self.second}'; '{self.second}' was not loaded "
            "(disable one of them with BACKLINE_DISABLE_PLUGINS)"
        )

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class LLMEntry:
    """A named LLM factory and the plugin that registered it."""

    name: str
    factory: Callable[..., LLM]
    description: str
    plugin: str


@dataclass
class PluginInfo:
    """One plugin as ``backline plugins`` lists it.

    ``name`` is the entry-point name (the name ``BACKLINE_PLUGINS`` and
    ``BACKLINE_DISABLE_PLUGINS`` use); ``error`` is set when ``status`` is
    ``"failed"``; ``exception`` is the original error, for tracebacks;
    ``disabled_by`` names the variable that disabled it; ``printed`` is what it
    printed to stdout while loading (kept off stdout, cut at
    ``Limits.max_plugin_output_chars``).
    """

    name: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None
    builtin: bool = False
    status: PluginStatus = "loaded"
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    backgrounds: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    llms: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    disabled_by: str | None = None
    printed: str | None = None
    search_providers: list[str] = field(default_factory=list)
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def status_text(self) -> str:
        """``loaded``, ``failed: <error>`` or ``disabled: <why>``."""
        if self.status == "failed":
            return f"failed: {self.error}"
        if self.status == "disabled" and self.disabled_by is not None:
            how = "not named in" if self.disabled_by == "BACKLINE_PLUGINS" else "named in"
            return f"disabled: {how} {self.disabled_by}"
        return self.status

    def registered(self) -> dict[str, list[str]]:
        return {
            "backgrounds": list(self.backgrounds),
            "tools": list(self.tools),
            "llms": list(self.llms),
            "commands": list(self.commands),
            "options": list(self.options),
            "search_providers": list(self.search_providers),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-compatible record (what ``backline plugins --json`` prints)."""
        return {
            "name": self.name,
            "distribution": self.distribution,
            "version": self.version,
            "module": self.module,
            "builtin": self.builtin,
            "status": self.status,
            "error": self.error,
            "disabled_by": self.disabled_by,
            "printed": self.printed,
            "hooks": list(self.hooks),
            **self.registered(),
        }


class ClashError(Exception):
    """A staged registration clashed with the registry (internal)."""

    def __init__(self, clash: Clash) -> None:
        super().__init__(clash.message)
        self.clash = clash


class RegistrationClosed(RuntimeError):
    pass


class Staged:
    """One plugin's registrations, collected while its hooks run."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.backgrounds: dict[str, BackgroundDefinition] = {}
        self.tools: dict[str, FunctionTool] = {}
        self.llms: dict[str, LLMEntry] = {}
        self.options: dict[str, OptionEntry] = {}
        self.search_providers: dict[str, SearchProviderEntry] = {}
        self._open_hook: str | None = None

    # -- the ``register`` callbacks handed to hooks --------------------------------
    def callback(self, hook: str) -> Callable[..., None]:
        """The ``register`` callable for ``hook``; valid only while the hook runs."""
        adders: dict[str, Callable[..., None]] = {
            "register_background_sessions": self._add_background,
            "register_tools": self._add_tool,
            "register_llms": self._add_llm,
            "register_options": self._add_option,
            "register_search_providers": self._add_search_provider,
        }
        add = adders[hook]

        def register(*args: Any, **kwargs: Any) -> None:
            if self._open_hook != hook:
                raise RegistrationClosed(
                    f"plugin '{self.plugin}': {hook}'s register() was called after the hook "
                    "returned; register everything while the hook runs"
                )
            add(*args, **kwargs)

        register.__name__ = "register"
        register.__doc__ = add.__doc__
        return register

    def open(self, hook: str | None) -> None:
        self._open_hook = hook

    def _add_background(self, definition: BackgroundDefinition) -> None:
        """Register a ``BackgroundDefinition`` (built with ``@backline.background``)."""
        if not isinstance(definition, BackgroundDefinition):
            raise TypeError(
                "register_background_sessions: expected a BackgroundDefinition "
                f"(use @backline.background), got {type(definition).__name__}"
            )
        if definition.id in self.backgrounds:
            raise ClashError(Clash("background", definition.id, self.plugin, self.plugin))
        self.backgrounds[definition.id] = definition

    def _add_tool(self, tool: FunctionTool | Callable[..., Any]) -> None:
        """Register a ``FunctionTool`` or a plain function (wrapped with ``function_tool``)."""
        if not isinstance(tool, FunctionTool):
            if not callable(tool) or inspect.isclass(tool):
                raise TypeError(
                    "register_tools: expected a FunctionTool (@backline.function_tool) or a "
                    f"function, got {type(tool).__name__}"
                )
            tool = function_tool(tool)
        if tool.name in self.tools:
            raise ClashError(Clash("tool", tool.name, self.plugin, self.plugin))
        self.tools[tool.name] = tool

    def _add_llm(self, name: str, factory: Callable[..., LLM], *, description: str = "") -> None:
        """Register an LLM factory under ``name``: ``factory(**options) -> LLM``."""
        if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
            raise ValueError(f"register_llms: LLM name must be a non-empty word, got {name!r}")
        if not callable(factory):
            raise TypeError(f"register_llms: the factory for '{name}' must be callable")
        if name in self.llms:
            raise ClashError(Clash("llm", name, self.plugin, self.plugin))
        self.llms[name] = LLMEntry(name, factory, description, self.plugin)

    def _add_search_provider(
        self, name: str, factory: SearchProviderFactory, *, description: str = ""
    ) -> None:
        """Register a search provider factory under ``name``: ``factory(**options)``."""
        if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
            raise ValueError(
                f"register_search_providers: the name must be a non-empty word, got {name!r}"
            )
        if not callable(factory):
            raise TypeError(f"register_search_providers: the factory for '{name}' must be callable")
        if name in self.search_providers:
            raise ClashError(Clash("search_provider", name, self.plugin, self.plugin))
        self.search_providers[name] = SearchProviderEntry(name, factory, description, self.plugin)

    def _add_option(self, *param_decls: str, envvar: str, help: str, **kwargs: Any) -> None:
        """Add a front-end option: ``register("--search", envvar="X_SEARCH", help="...")``.

        The option joins ``backline console``, ``backline web`` and every other
        front end; a value given on the command line is exported to ``envvar``.
        Other keywords go to ``click.Option`` (``type``, ``is_flag``, ``metavar``,
        ``show_default`` ...), except ``default``, ``multiple`` and ``callback``.
        """
        entry = make_option(self.plugin, param_decls, envvar=envvar, help=help, **kwargs)
        if entry.flag in self.options:
            raise ClashError(Clash("option", entry.flag, self.plugin, self.plugin))
        self.options[entry.flag] = entry


class Registry:
    """Everything loaded plugins registered, keyed by name, with each owner."""

    def __init__(self) -> None:
        self.backgrounds: dict[str, BackgroundDefinition] = {}
        self.tools: dict[str, FunctionTool] = {}
        self.llms: dict[str, LLMEntry] = {}
        self.commands: dict[str, str] = {}
        self.options: dict[str, OptionEntry] = {}
        self.search_providers: dict[str, SearchProviderEntry] = {}
        self._owners: dict[tuple[Kind, str], str] = {}

    def owner(self, kind: Kind, name: str) -> str | None:
        return self._owners.get((kind, name))

    def check(self, staged: Staged) -> None:
        """Raise ``ClashError`` if committing ``staged`` would clash."""
        for name in staged.tools:
            if name in RESERVED_TOOL_NAMES:
                raise ClashError(Clash("tool", name, RESERVED_OWNER, staged.plugin))
        for entry in staged.options.values():
            for opt in entry.option.opts + entry.option.secondary_opts:
                if opt in RESERVED_OPTIONS:
                    raise ClashError(Clash("option", opt, RESERVED_OWNER, staged.plugin))
        items: list[tuple[Kind, Iterable[str]]] = [
            ("background", staged.backgrounds),
            ("tool", staged.tools),
            ("llm", staged.llms),
            ("option", staged.options),
            ("search_provider", staged.search_providers),
        ]
        for kind, names in items:
            for name in names:
                first = self._owners.get((kind, name))
                if first is not None:
                    raise ClashError(Clash(kind, name, first, staged.plugin))

    def commit(self, staged: Staged) -> None:
        """Add ``staged`` (call ``check`` first)."""
        self.backgrounds.update(staged.backgrounds)
        self.tools.update(staged.tools)
        self.llms.update(staged.llms)
        self.options.update(staged.options)
        self.search_providers.update(staged.search_providers)
        for kind, names in (
            ("background", staged.backgrounds),
            ("tool", staged.tools),
            ("llm", staged.llms),
            ("option", staged.options),
            ("search_provider", staged.search_providers),
        ):
            for name in names:
                self._owners[(kind, name)] = staged.plugin  # type: ignore[index]

    def add_command(self, name: str, plugin: str) -> None:
        self.commands[name] = plugin
        self._owners[("command", name)] = plugin

    def remove(self, plugin: str) -> None:
        """Forget everything ``plugin`` registered."""
        for (kind, name), owner in list(self._owners.items()):
            if owner != plugin:
                continue
            del self._owners[(kind, name)]
            tables: dict[str, dict[str, Any]] = {
                "background": self.backgrounds,
                "tool": self.tools,
                "llm": self.llms,
                "command": self.commands,
                "option": self.options,
                "search_provider": self.search_providers,
            }
            tables[kind].pop(name, None)
