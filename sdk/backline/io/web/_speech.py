"""Who listens and speaks in a tab: the browser, or the server's own engines.

``backline web --speech``: ``browser`` (the browser's speech recognition and synthesis,
as before), ``server`` (the page streams the microphone to the server, which
recognises it and speaks the replies with backline's engines), or ``auto`` (the
default: the browser's own recognition where it has one, the server's otherwise).
``WebSpeech`` is that choice with its engines, built once per process and shared by
every tab (each tab opens its own streams).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from ...app import SpeechEngines, SpeechOptions
    from ...plugins import PluginManager
    from ...speech import SpeechToText, TextToSpeech, VoiceActivityDetector

SpeechMode: TypeAlias = Literal["auto", "server", "browser"]
SPEECH_MODES: tuple[SpeechMode, ...] = ("auto", "server", "browser")


@dataclass(frozen=True)
class WebSpeech:
    """The server's speech (see the module doc). ``stt``, ``tts`` and ``vad`` are the
    engines (all three, or none); ``names`` their names (``{"stt": ..., "tts": ...,
    "vad": ...}``) and ``local`` whether all of them run on this machine, for the page;
    ``description`` the line said at start; ``unavailable`` why the server has no
    speech (``auto`` without a ready engine: every tab then uses the browser's).
    ``model``: the voice agent's LLM hears and speaks itself (``stt`` is ``None``: each
    tab's session gives its model the microphone, ``backline.app.session_speech``)."""

    mode: SpeechMode = "browser"
    stt: SpeechToText | None = None
    tts: TextToSpeech | None = None
    vad: VoiceActivityDetector | None = None
    names: Mapping[str, str] = field(default_factory=dict)
    local: bool = True
    description: str | None = None
    unavailable: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in SPEECH_MODES:
            raise ValueError(f"speech mode must be one of {', '.join(SPEECH_MODES)}")
        given = [e is not None for e in (self.stt or self.model, self.tts, self.vad)]
        if any(given) and not all(given):
            raise ValueError("the server's speech needs all three engines: stt, tts and vad")
        if self.mode == "server" and not self.ready:
            raise ValueError("speech 'server' needs its engines (stt, tts, vad)")

    @classmethod
    def from_engines(cls, mode: SpeechMode, engines: SpeechEngines) -> WebSpeech:
        """From ``backline.app.build_speech``'s engines."""
        return cls(
            mode,
            stt=engines.stt,
            tts=engines.tts,
            vad=engines.vad,
            names={"stt": engines.model or "", **{e.kind: e.name for e in engines.entries if e}},
            local=engines.model is None and all(e.local for e in engines.entries if e),
            description=engines.describe(),
            model=engines.model,
        )

    @property
    def ready(self) -> bool:
        """Whether the server can listen and speak."""
        hears = self.stt is not None or self.model is not None
        return hears and self.tts is not None and self.vad is not None

    def server_for(self, preference: str | None) -> bool:
        """Whether the server listens and speaks in a tab whose page prefers
        ``preference`` (``server``: it has no speech recognition of its own; ``browser``
        or nothing: it has one, or is a client that does not say)."""
        if not self.ready or self.mode == "browser":
            return False
        return self.mode == "server" or preference == "server"

    def start_line(self) -> str:
        """What ``backline web`` says at start about speech."""
        if self.mode == "browser":
            return "speech: the browser's own (--speech browser)"
        if not self.ready:
            return f"speech: the browser's own; the server has none ({self.unavailable})"
        described = self.description or "speech: the server's own"
        if self.mode == "server":
            return f"{described} (--speech server: in every browser)"
        return f"{described}, in browsers without their own speech recognition (--speech auto)"

    def log_options(self) -> dict[str, str]:
        """What the conversation log keeps of it (the session row's options)."""
        return {"speech": self.mode, **self.names}

    def page_info(self, by_server: bool) -> dict[str, Any]:
        """``hello``'s ``speech``: who listens and speaks in this tab (``by``), the server's
        ``mode``, its engines, whether they run on this machine, and why it has none."""
        return {
            "by": "server" if by_server else "browser",
            "mode": self.mode,
            "engines": dict(self.names) if self.ready else None,
            "local": self.local,
            "unavailable": self.unavailable,
        }


def choose_web_speech(
    manager: PluginManager, mode: SpeechMode, options: SpeechOptions, *, llm: str | None = None
) -> WebSpeech:
    """The ``--speech`` mode and the speech options as a ``WebSpeech``, its engines built
    (blocking: before the server starts). ``server``: an engine that cannot be had is a
    click error naming its option; ``auto``: so is one the user named, and with none
    named and none ready the browser's speech is used, saying why; ``browser``: speech
    options are a usage error (nothing would use them)."""
    import click

    from ...app import build_speech

    given = options.as_dict()
    if mode == "browser":
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise click.UsageError(
                f"{flags}: the server's speech engines are not used with --speech browser; "
                "use --speech server or auto"
            )
        return WebSpeech("browser")
    try:
        engines = build_speech(manager, options, llm=llm)
    except click.ClickException as e:
        if mode == "server" or given:
            raise
        return WebSpeech("auto", unavailable=e.format_message())
    return WebSpeech.from_engines(mode, engines)
