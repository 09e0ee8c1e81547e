"""What plugins registered: the shared registry, one plugin's staged batch, and clashes.

A plugin's registrations are collected into a ``Staged`` batch first and
committed to the ``Registry`` all at once, or not at all: a clash or a bad item
fails the whole plugin and leaves the registry as it was. The registry is keyed
by kind (``RegistrationKind.name``), so kinds that plugins add are held exactly
like backline's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ._kinds import RegistrationKind

T = TypeVar("T")

RESERVED_OWNER = "backline (reserved)"
"""The owner named in a clash with a name backline keeps for itself."""

KIND_LABELS: dict[str, str] = {
    "command": "command",
    "plugin": "plugin name",
    "hook": "hook",
    "kind": "registration kind",
}
"""How clashes name what is not a ``RegistrationKind`` (those carry their own label)."""


@dataclass(frozen=True)
class Clash:
    """Two plugins registered the same name (or one took a reserved name).

    ``kind`` is a registration kind's name (``"tool"``, ``"exporter"``) or
    ``"command"``, ``"plugin"``, ``"hook"``, ``"kind"``; ``label`` is how the message
    names it. ``first`` holds the name; ``second`` was refused (and failed as a whole).
    """

    kind: str
    name: str
    first: str
    second: str
    label: str = ""

    @property
    def message(self) -> str:
        label = self.label or KIND_LABELS.get(self.kind, self.kind.replace("_", " "))
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


class ClashError(Exception):
    """A staged registration clashed with the registry (internal)."""

    def __init__(self, clash: Clash) -> None:
        super().__init__(clash.message)
        self.clash = clash


class RegistrationClosed(RuntimeError):
    """A ``register`` callback was called after its hook returned."""


class Staged:
    """One plugin's registrations, collected while its hooks run."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.items: dict[str, dict[str, Any]] = {}  # kind name -> item name -> item
        self._open_hook: str | None = None

    def callback(self, kind: RegistrationKind[Any]) -> Callable[..., None]:
        """The ``register`` callable for ``kind``'s hook; valid only while the hook runs."""
        items = self.items.setdefault(kind.name, {})

        def register(*args: Any, **kwargs: Any) -> None:
            if self._open_hook != kind.hook:
                raise RegistrationClosed(
                    f"plugin '{self.plugin}': {kind.hook}'s register() was called after the "
                    "hook returned; register everything while the hook runs"
                )
            name, item = kind.make(self.plugin, *args, **kwargs)
            if name in items:
                raise ClashError(Clash(kind.name, name, self.plugin, self.plugin, kind.label))
            items[name] = item

        register.__name__ = "register"
        register.__doc__ = kind.make.__doc__
        return register

    def open(self, hook: str | None) -> None:
        self._open_hook = hook

    def names(self, kind: RegistrationKind[Any]) -> list[str]:
        return sorted(self.items.get(kind.name, {}))


class Registry:
    """Everything loaded plugins registered, by kind and name, with each owner."""

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, Any]] = {}
        self._owners: dict[tuple[str, str], str] = {}

    def items(self, kind: RegistrationKind[T]) -> dict[str, T]:
        """The items of ``kind`` by name (the registry's own table: do not change it)."""
        return cast("dict[str, T]", self._tables.setdefault(kind.name, {}))

    @property
    def commands(self) -> dict[str, str]:
        """Command name -> the plugin that added it."""
        return cast("dict[str, str]", self._tables.setdefault("command", {}))

    def owner(self, kind: str, name: str) -> str | None:
        return self._owners.get((kind, name))

    def check(self, staged: Staged, kinds: Iterable[RegistrationKind[Any]]) -> None:
        """Raise ``ClashError`` if committing ``staged`` would clash."""
        kinds = [k for k in kinds if staged.items.get(k.name)]
        for kind in kinds:
            if kind.reserved is None:
                continue
            for name, item in staged.items[kind.name].items():
                taken = kind.reserved(name, item)
                if taken is not None:
                    raise ClashError(
                        Clash(kind.name, taken, RESERVED_OWNER, staged.plugin, kind.label)
                    )
        for kind in kinds:
            for name in staged.items[kind.name]:
                first = self._owners.get((kind.name, name))
                if first is not None:
                    raise ClashError(Clash(kind.name, name, first, staged.plugin, kind.label))

    def commit(self, staged: Staged) -> None:
        """Add ``staged`` (call ``check`` first)."""
        for kind, items in staged.items.items():
            self._tables.setdefault(kind, {}).update(items)
            for name in items:
                self._owners[(kind, name)] = staged.plugin

    def add_command(self, name: str, plugin: str) -> None:
        self.commands[name] = plugin
        self._owners[("command", name)] = plugin

    def remove(self, plugin: str) -> None:
        """Forget everything ``plugin`` registered."""
        for (kind, name), owner in list(self._owners.items()):
            if owner == plugin:
                del self._owners[(kind, name)]
                self._tables.get(kind, {}).pop(name, None)
