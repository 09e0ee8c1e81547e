"""backline plugins: hook specifications, the plugin manager, the registry.

A plugin is a module with ``@backline.hookimpl`` functions, published under the
``backline`` entry-point group::

    [project.entry-points.backline]
    weather = "backline_weather.plugin"

A plugin may add hooks of its own for other plugins to implement
(``register_hookspecs``, with ``RegistrationKind`` for what they register).
See ``docs/plugins.md`` (a tutorial) and ``docs/hooks.md`` (the reference).
The manager and registry names load on first use, so ``import backline`` only
pays for the hook markers.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from ._hookspecs import OBSERVER_HOOKS, PROJECT_NAME, REGISTRATION_HOOKS, hookimpl, hookspec

if TYPE_CHECKING:
    from ._core_kinds import (
        LLMEntry,
        LLMFactory,
        RegisterBackground,
        RegisterLLM,
        RegisterOption,
        RegisterTool,
    )
    from ._discovery import BUILTIN_PLUGINS, ENTRY_POINT_GROUP, ENV_ALLOW, ENV_DENY, ENV_STRICT
    from ._errors import PluginError, UnknownNameError
    from ._help import OptionSection
    from ._info import PluginInfo, PluginStatus
    from ._kinds import RegisterHookspecs, RegistrationKind
    from ._manager import PluginManager
    from ._options import (
        FRONT_END_MARK,
        GIVEN_OPTIONS_KEY,
        OptionEntry,
        attach_options,
        is_front_end,
    )
    from ._registry import RESERVED_OWNER, Clash
    from ._scaffold import create_plugin
    from ._speech_kinds import RegisterSpeech, SpeechEngineEntry

_LAZY = {
    "BUILTIN_PLUGINS": "._discovery",
    "ENTRY_POINT_GROUP": "._discovery",
    "ENV_ALLOW": "._discovery",
    "ENV_DENY": "._discovery",
    "ENV_STRICT": "._discovery",
    "PluginError": "._errors",
    "UnknownNameError": "._errors",
    "PluginManager": "._manager",
    "RESERVED_OWNER": "._registry",
    "Clash": "._registry",
    "LLMEntry": "._core_kinds",
    "LLMFactory": "._core_kinds",
    "RegisterBackground": "._core_kinds",
    "RegisterLLM": "._core_kinds",
    "RegisterOption": "._core_kinds",
    "RegisterTool": "._core_kinds",
    "OptionEntry": "._options",
    "FRONT_END_MARK": "._options",
    "GIVEN_OPTIONS_KEY": "._options",
    "OptionSection": "._help",
    "attach_options": "._options",
    "is_front_end": "._options",
    "create_plugin": "._scaffold",
    "PluginInfo": "._info",
    "PluginStatus": "._info",
    "RegisterHookspecs": "._kinds",
    "RegistrationKind": "._kinds",
    "RegisterSpeech": "._speech_kinds",
    "SpeechEngineEntry": "._speech_kinds",
}

__all__ = [
    "BUILTIN_PLUGINS",
    "ENTRY_POINT_GROUP",
    "ENV_ALLOW",
    "ENV_DENY",
    "ENV_STRICT",
    "FRONT_END_MARK",
    "GIVEN_OPTIONS_KEY",
    "OBSERVER_HOOKS",
    "PROJECT_NAME",
    "REGISTRATION_HOOKS",
    "RESERVED_OWNER",
    "Clash",
    "LLMEntry",
    "LLMFactory",
    "OptionEntry",
    "OptionSection",
    "PluginError",
    "PluginInfo",
    "PluginManager",
    "PluginStatus",
    "RegisterBackground",
    "RegisterHookspecs",
    "RegisterLLM",
    "RegisterOption",
    "RegisterSpeech",
    "RegisterTool",
    "RegistrationKind",
    "SpeechEngineEntry",
    "UnknownNameError",
    "attach_options",
    "create_plugin",
    "hookimpl",
    "hookspec",
    "is_front_end",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_module(module), name)
    globals()[name] = value
    return value


def _module(name: str) -> ModuleType:
    """One of this package's modules, imported on first use (spelled out, so every
    import is one a reader, and a linter, can follow)."""
    if name == "._discovery":
        from . import _discovery

        return _discovery
    elif name == "._errors":
        from . import _errors

        return _errors
    elif name == "._manager":
        from . import _manager

        return _manager
    elif name == "._registry":
        from . import _registry

        return _registry
    elif name == "._core_kinds":
        from . import _core_kinds

        return _core_kinds
    elif name == "._options":
        from . import _options

        return _options
    elif name == "._info":
        from . import _info

        return _info
    elif name == "._kinds":
        from . import _kinds

        return _kinds
    elif name == "._help":
        from . import _help

        return _help
    elif name == "._speech_kinds":
        from . import _speech_kinds

        return _speech_kinds
    else:
        from . import _scaffold

        return _scaffold


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
