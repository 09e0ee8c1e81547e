"""backline plugins: hook specifications, the plugin manager, the registry.

A plugin is a module with ``@backline.hookimpl`` functions, published under the
``backline`` entry-point group::

    [project.entry-points.backline]
    weather = "backline_weather.plugin"

See ``docs/plugins.md`` (a tutorial) and ``docs/hooks.md`` (the reference).
The manager and registry names load on first use, so ``import backline`` only
pays for the hook markers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._hookspecs import OBSERVER_HOOKS, PROJECT_NAME, REGISTRATION_HOOKS, hookimpl, hookspec

if TYPE_CHECKING:
    from ._manager import (
        BUILTIN_PLUGINS,
        ENTRY_POINT_GROUP,
        ENV_ALLOW,
        ENV_DENY,
        ENV_STRICT,
        PluginError,
        PluginManager,
        UnknownNameError,
    )
    from ._options import OptionEntry
    from ._registry import (
        RESERVED_OWNER,
        Clash,
        LLMEntry,
        LLMFactory,
        PluginInfo,
        PluginStatus,
        RegisterBackground,
        RegisterLLM,
        RegisterOption,
        RegisterTool,
    )
    from ._search import (
        RegisterSearchProvider,
        SearchProvider,
        SearchProviderEntry,
        SearchProviderFactory,
        SearchResult,
    )

_LAZY = {
    "BUILTIN_PLUGINS": "._manager",
    "ENTRY_POINT_GROUP": "._manager",
    "ENV_ALLOW": "._manager",
    "ENV_DENY": "._manager",
    "ENV_STRICT": "._manager",
    "PluginError": "._manager",
    "PluginManager": "._manager",
    "UnknownNameError": "._manager",
    "RESERVED_OWNER": "._registry",
    "Clash": "._registry",
    "LLMEntry": "._registry",
    "LLMFactory": "._registry",
    "OptionEntry": "._options",
    "PluginInfo": "._registry",
    "PluginStatus": "._registry",
    "RegisterBackground": "._registry",
    "RegisterLLM": "._registry",
    "RegisterOption": "._registry",
    "RegisterTool": "._registry",
    "RegisterSearchProvider": "._search",
    "SearchProvider": "._search",
    "SearchProviderEntry": "._search",
    "SearchProviderFactory": "._search",
    "SearchResult": "._search",
}

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "ENV_ALLOW",
    "ENV_DENY",
    "ENV_STRICT",
    "OBSERVER_HOOKS",
    "PROJECT_NAME",
    "REGISTRATION_HOOKS",
    "RESERVED_OWNER",
    "Clash",
    "LLMEntry",
    "LLMFactory",
    "OptionEntry",
    "PluginError",
    "PluginInfo",
    "PluginManager",
    "PluginStatus",
    "RegisterBackground",
    "RegisterLLM",
    "RegisterOption",
    "RegisterSearchProvider",
    "RegisterTool",
    "SearchProvider",
    "SearchProviderEntry",
    "SearchProviderFactory",
    "SearchResult",
    "UnknownNameError",
    "hookimpl",
    "hookspec",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
