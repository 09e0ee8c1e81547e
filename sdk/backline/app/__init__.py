"""The front-end contract: what a front end uses to turn the user's choices into a
running conversation.

``backline console``, ``backline web``, the LiveKit worker and any third-party
front end do the same four things, with these names (docs/frontends.md):

1. take the **session options** (``@session_options`` adds ``--background``,
   ``--llm``, ``--model``, ``--instructions``, ``--agent``, ``--log-file``,
   ``--no-log``, ``--mcp-config`` and ``--user-away-signal`` to a click command, which receives one
   ``SessionOptions``; plugins' options join every such command);
2. **build the session** from them and the loaded plugins (``plugin_manager()``):
   ``prepare_session`` checks the choices (``check_options``), the credentials
   (``preflight``), then builds an unstarted ``Session`` and its first ``Agent``
   (``build_session``), recorded in the conversation log
   (``attach_conversation_log``);
   A front end that speaks with backline's own engines adds ``@speech_options``
   (``--stt``, ``--tts``, ``--vad`` and their models and voice) and turns them into
   engines with ``build_speech`` (the best local engines that are ready, unless named);
3. while it runs, **serve the voice channel** to coding agents over MCP
   (``async with hosting_voice_channel(session, "my front end"):``);
4. run the conversation: start the session, push the user's turns, show what it
   says, close it.

Errors are click exceptions that say what was wrong and which option to change.
Importing this package loads neither the model SDKs nor the HTTP or MCP servers.
"""

from __future__ import annotations

from ._build import (
    DEFAULT_INSTRUCTIONS,
    attach_conversation_log,
    available_backgrounds,
    build_session,
    check_options,
    default_instructions,
    make_agent,
    preflight,
    prepare_session,
)
from ._hosting import hosting_voice_channel
from ._options import DEFAULT_LLM, SessionOptions, session_options
from ._plugins import PluginSource, plugin_manager
from ._speech import (
    SPEECH_SECTION,
    SpeechEngines,
    SpeechOptions,
    build_speech,
    session_speech,
    speech_options,
)

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_LLM",
    "SPEECH_SECTION",
    "PluginSource",
    "SessionOptions",
    "SpeechEngines",
    "SpeechOptions",
    "attach_conversation_log",
    "available_backgrounds",
    "build_session",
    "build_speech",
    "check_options",
    "default_instructions",
    "hosting_voice_channel",
    "make_agent",
    "plugin_manager",
    "preflight",
    "prepare_session",
    "session_options",
    "session_speech",
    "speech_options",
]
