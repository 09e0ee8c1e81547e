"""The built-in plugin ``speech``: ``energy``, the voice-activity detector that needs no
model, so a front end always has one (``backline-local-speech`` adds Silero)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._hookspecs import hookimpl

if TYPE_CHECKING:
    from ..speech.vad import EnergyVAD
    from ._speech_kinds import RegisterSpeech


def energy_vad(*, model: str | None = None, **options: Any) -> EnergyVAD:
    """``backline.speech.EnergyVAD``: loudness against the room's noise floor."""
    from ..speech.vad import EnergyVAD

    return EnergyVAD(**options)


@hookimpl
def register_vad(register: RegisterSpeech) -> None:
    register(
        "energy",
        energy_vad,
        description="loudness above the room's noise floor: no model, no download; "
        "loud noise counts as speech",
    )
