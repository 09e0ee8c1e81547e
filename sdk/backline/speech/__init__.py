"""Speech of backline's own: audio frames, speech-to-text, text-to-speech, voice
activity detection, and the pipeline between a microphone, a speaker and a session.

- ``AudioFrame``: 16-bit PCM, the one audio type (``read_wav``/``write_wav``).
- ``SpeechToText`` / ``STTStream`` / ``Transcript``; ``BatchSTT`` for engines that
  transcribe whole utterances.
- ``TextToSpeech``; ``ThreadedTTS`` for engines with a blocking synthesis;
  ``VoicedTTS`` for one that speaks a piece in another of its voices;
  ``SentenceSplitter``.
- ``VoiceActivityDetector`` / ``VADStream`` / ``VADEvent``; ``FrameVAD``; ``EnergyVAD``
  (no model, no download).
- ``SpeechInput``: microphone frames → user turns (VAD-gated, interims passed on,
  barge-in after enough speech or words); ``SpeechOutput``: the agent's replies →
  audio into an ``AudioSink``, sentence by sentence, with what was heard reported
  back; ``ClockSink`` plays on the event loop's clock.
- ``TextOutput``: where a reply's text goes and how its playout is reported.
- Devices (``Microphone``, ``Speaker``, ``list_devices``: PortAudio, the extra
  ``audio``), files (``WavInput``, ``WavOutput``) and echo (``echo_canceller()``:
  WebRTC's, the extra ``echo``; ``EchoGuard`` without it). Their libraries load when
  a device or a canceller is made.

Engines are plugins (``register_stt``, ``register_tts``, ``register_vad``); this
package imports no engine, and nothing heavy.
"""

from .audio_input import SpeechInput, TurnSink
from .audio_output import AudioSink, ClockSink, SpeechOutput
from .devices import (
    AudioDevice,
    AudioSource,
    DeviceError,
    Microphone,
    Speaker,
    choose_device,
    list_devices,
)
from .echo import EchoCanceller, EchoGuard, WebRTCEchoCanceller, echo_canceller, echo_unavailable
from .files import WavInput, WavOutput
from .frames import AudioFrame, read_wav, split_frames, write_wav
from .output import InMemoryTextOutput, PlayoutResult, TextOutput
from .speaking import SpeakingModel
from .stt import BatchSTT, SpeechToText, STTStream, Transcript
from .tts import SentenceSplitter, TextToSpeech, ThreadedTTS, VoicedTTS
from .vad import EnergyVAD, FrameVAD, VADEvent, VADStream, VoiceActivityDetector

__all__ = [
    "AudioDevice",
    "AudioFrame",
    "AudioSink",
    "AudioSource",
    "BatchSTT",
    "ClockSink",
    "DeviceError",
    "EchoCanceller",
    "EchoGuard",
    "EnergyVAD",
    "FrameVAD",
    "InMemoryTextOutput",
    "Microphone",
    "PlayoutResult",
    "STTStream",
    "SentenceSplitter",
    "Speaker",
    "SpeakingModel",
    "SpeechInput",
    "SpeechOutput",
    "SpeechToText",
    "TextOutput",
    "TextToSpeech",
    "ThreadedTTS",
    "Transcript",
    "TurnSink",
    "VADEvent",
    "VADStream",
    "VoiceActivityDetector",
    "VoicedTTS",
    "WavInput",
    "WavOutput",
    "WebRTCEchoCanceller",
    "choose_device",
    "echo_canceller",
    "echo_unavailable",
    "list_devices",
    "read_wav",
    "split_frames",
    "write_wav",
]
