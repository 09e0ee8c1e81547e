"""How the front ends make an alert heard (``background_alert``): one rule for all of them.

A background finished, failed or asks the user something: the console rings the
terminal's bell and prints a marked line, ``backline voice`` plays a short sound
into its audio output, the page plays the same sound (Web Audio) and shows a
notification. Each kind has its own sound, so the user tells them apart without
looking: ``TONES`` (notes of a fraction of a second), the page is sent them too.
"""

from __future__ import annotations

import math

from ..speech.frames import AudioFrame
from ..voice.events import AlertKind

__all__ = ["ALERT_MARK", "BELL", "TONES", "alert_line", "alert_sound"]

BELL = "\a"
"""What rings a terminal's bell (the console writes it at once, even mid-reply)."""
ALERT_MARK = "🔔"
"""How an alert's line starts in the console."""

TONES: dict[AlertKind, tuple[tuple[float, float], ...]] = {
    # (frequency in Hz, seconds); 0 Hz is a short pause.
    "finished": ((784.0, 0.09), (1047.0, 0.16)),  # up a fourth: done
    "failed": ((523.0, 0.12), (392.0, 0.12), (311.0, 0.2)),  # down, darker: it failed
    "question": ((880.0, 0.07), (0.0, 0.04), (880.0, 0.07), (1319.0, 0.14)),  # tap tap, up?
}
"""Each kind's sound: short, distinct, well under half a second."""
LOUDNESS = 7000
"""The sound's peak (of 32767): below the agent's voice, so it does not startle."""
FADE = 0.008
"""Seconds of fade in and out of each note (no click)."""


def alert_line(text: str) -> str:
    """The console's line for an alert (``BackgroundAlert.text``)."""
    return f"{ALERT_MARK} {' '.join(text.split())}\n"


def alert_sound(kind: AlertKind, sample_rate: int = 24000) -> AudioFrame:
    """The sound of an alert of ``kind``: one frame of mono 16-bit audio."""
    samples: list[int] = []
    ramp = max(1.0, FADE * sample_rate)
    for frequency, seconds in TONES[kind]:
        n = int(sample_rate * seconds)
        if frequency <= 0:
            samples.extend([0] * n)
            continue
        step = 2 * math.pi * frequency / sample_rate
        for i in range(n):
            fade = min(1.0, i / ramp, (n - i) / ramp)
            samples.append(int(LOUDNESS * fade * math.sin(step * i)))
    return AudioFrame.from_samples(samples, sample_rate)
