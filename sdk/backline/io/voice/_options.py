"""The options of ``backline voice`` that are its own: how the user talks, and where
the audio comes from and goes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ...plugins import OptionSection
from ...speech.listening import (
    DEFAULT_WAKE_PHRASE,
    DEFAULT_WAKE_WINDOW,
    LISTENING_MODES,
    ListeningMode,
)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class VoiceOptions:
    """``mode``: how the user talks (``always``, ``push``, ``wake``, ``mute``);
    ``wake_phrase``/``wake_window``: the wake mode's phrase and quiet period;
    ``input_device``/``output_device``: a device index or part of its name;
    ``audio_in``: a WAV file played as the microphone, in real time; ``audio_out``: a
    WAV file that records what the agent says (instead of the speaker);
    ``echo_cancellation``: cancel the agent's own voice from the microphone."""

    mode: ListeningMode = "always"
    wake_phrase: str = DEFAULT_WAKE_PHRASE
    wake_window: float = DEFAULT_WAKE_WINDOW
    input_device: str | None = None
    output_device: str | None = None
    audio_in: str | None = None
    audio_out: str | None = None
    echo_cancellation: bool = True
    plain: bool = False


VOICE_SECTION = OptionSection("Voice", help="how you talk, and the audio devices")


def voice_options(command: F) -> F:
    """Add the options of ``VoiceOptions`` to a click command; it receives
    ``voice_options=``."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        mode: str,
        wake_phrase: str,
        wake_window: float,
        input_device: str | None,
        output_device: str | None,
        audio_in: str | None,
        audio_out: str | None,
        echo_cancellation: bool,
        plain: bool,
        **kwargs: Any,
    ) -> Any:
        options = VoiceOptions(
            mode,  # type: ignore[arg-type]  # click.Choice checked it
            wake_phrase,
            wake_window,
            input_device,
            output_device,
            audio_in,
            audio_out,
            echo_cancellation,
            plain,
        )
        return command(*args, voice_options=options, **kwargs)

    params: list[click.Parameter] = getattr(wrapper, "__click_params__", [])
    wrapper.__click_params__ = params  # type: ignore[attr-defined]
    params.extend(reversed([VOICE_SECTION.title(), *_params()]))
    return wrapper  # type: ignore[return-value]


def _params() -> list[click.Option]:
    option = VOICE_SECTION.option
    return [
        option(
            "--mode",
            type=click.Choice(LISTENING_MODES),
            default="always",
            show_default=True,
            help="How you talk: always-on, push-to-talk (hold Space on an empty line, or "
            "Ctrl-T to tap on and off), a wake phrase, or muted. /mode switches.",
        ),
        option(
            "--wake-phrase",
            default=DEFAULT_WAKE_PHRASE,
            show_default=True,
            metavar="TEXT",
            help="With --mode wake: what opens a conversation window.",
        ),
        option(
            "--wake-window",
            type=click.FloatRange(min=1.0, max=600.0),
            default=DEFAULT_WAKE_WINDOW,
            show_default=True,
            metavar="SECONDS",
            help="With --mode wake: the quiet that closes the window.",
        ),
        option(
            "--input-device", metavar="ID|NAME", help="The microphone (`backline speech devices`)."
        ),
        option(
            "--output-device", metavar="ID|NAME", help="The speaker (`backline speech devices`)."
        ),
        option(
            "--audio-in",
            type=click.Path(exists=True, dir_okay=False),
            metavar="FILE.wav",
            help="Play this recording as the microphone, in real time (tests, demos, bug reports).",
        ),
        option(
            "--audio-out",
            type=click.Path(dir_okay=False, writable=True),
            metavar="FILE.wav",
            help="Record what the agent says to this file instead of the speaker.",
        ),
        option(
            "--echo-cancellation/--no-echo-cancellation",
            default=True,
            show_default=True,
            help="Cancel the agent's own voice from the microphone (needs `pip install "
            "'backline[echo]'`; without it, use headphones).",
        ),
        option("--plain", is_flag=True, help="Plain lines, even in a terminal."),
    ]
