"""``PluginInfo``: one plugin as ``backline plugins`` lists it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias

PluginStatus: TypeAlias = Literal["loaded", "failed", "disabled"]

CORE_KEYS = ("backgrounds", "tools", "llms", "commands", "options")
"""What backline's own kinds (and ``register_commands``) record, in listing order."""


@dataclass
class PluginInfo:
    """One plugin as ``backline plugins`` lists it.

    ``name`` is the entry-point name (the name ``BACKLINE_PLUGINS`` and
    ``BACKLINE_DISABLE_PLUGINS`` use); ``error`` is set when ``status`` is
    ``"failed"``; ``exception`` is the original error, for tracebacks;
    ``disabled_by`` names the variable that disabled it; ``printed`` is what it
    printed to stdout while loading (kept off stdout, cut at
    ``Limits.max_plugin_output_chars``).

    ``backgrounds`` ... ``options`` are what it registered of backline's kinds;
    ``by_kind`` what it registered of the kinds plugins added (``register_hookspecs``),
    keyed like the JSON (``"exporters"``): every kind the manager knows has a
    key, empty if the plugin registered none. ``waiting`` lists the hooks it
    implements that no plugin specifies yet (only for plugins registered by hand:
    ``PluginManager.check_pending()`` fails them).
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
    by_kind: dict[str, list[str]] = field(default_factory=dict)
    waiting: list[str] = field(default_factory=list)
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
        """What it registered, by key: backline's kinds, then those plugins added."""
        core = {key: list(getattr(self, key)) for key in CORE_KEYS}
        return {**core, **{key: list(names) for key, names in self.by_kind.items()}}

    def set_registered(self, key: str, names: list[str]) -> None:
        """Record ``names`` under ``key`` (a field for backline's kinds, else ``by_kind``)."""
        if key in CORE_KEYS:
            setattr(self, key, list(names))
        else:
            self.by_kind[key] = list(names)

    def clear_registered(self) -> None:
        for key in self.registered():
            self.set_registered(key, [])

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


RESERVED_KEYS = frozenset(f.name for f in fields(PluginInfo))
"""Keys a plugin's kind cannot take: the JSON record's own."""
