"""The plugin manager a front end builds its sessions with: one per command run."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import click

from ..plugins import PluginError, PluginManager

_META_KEY = "backline.app.plugins"


@runtime_checkable
class PluginSource(Protocol):
    """A root command that loads the plugins itself (``backline``'s root group does:
    it registers their commands and options as it loads them)."""

    def plugin_manager(self, *, strict_errors: bool = True) -> PluginManager:
        """The loaded plugins; a failed plugin raises ``click.ClickException`` in strict
        mode (``BACKLINE_STRICT_PLUGINS=1``) unless ``strict_errors`` is false."""
        ...


def plugin_manager(
    ctx: click.Context | None = None, *, strict_errors: bool = True
) -> PluginManager:
    """The loaded plugin manager for the command running now (``ctx``, default the
    current click context): the root command's when it is a ``PluginSource`` (under
    ``backline``), else one loaded from the environment once per command run (a
    command run on its own), or, outside any click command, a new one.

    In strict mode (``BACKLINE_STRICT_PLUGINS=1``) a failed plugin raises
    ``click.ClickException`` unless ``strict_errors`` is false.
    """
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return _Loaded().manager_or_error(strict_errors)
    root = ctx.find_root()
    if isinstance(root.command, PluginSource):
        return root.command.plugin_manager(strict_errors=strict_errors)
    loaded = root.meta.get(_META_KEY)
    if not isinstance(loaded, _Loaded):
        loaded = root.meta[_META_KEY] = _Loaded()
    return loaded.manager_or_error(strict_errors)


class _Loaded:
    """Plugins loaded from the environment, and why loading failed in strict mode."""

    def __init__(self) -> None:
        self.manager = PluginManager.from_environment()
        self.error: PluginError | None = None
        try:
            self.manager.load()
        except PluginError as e:
            self.error = e

    def manager_or_error(self, strict_errors: bool) -> PluginManager:
        if self.error is not None and strict_errors:
            raise click.ClickException(str(self.error))
        return self.manager
