"""backline-local-speech: speech engines that run on the user's own machine.

Speech-to-text: ``pocketsphinx`` (its wheel ships an English model: no download)
and ``whisper`` (whisper.cpp). Text-to-speech: ``espeak`` (the system's eSpeak NG:
no download), ``kokoro`` and ``piper``. Voice activity: ``silero`` and ``energy``
(no model). Each loads its library and model when first used.
"""
