"""backline: background agents behind a voice conversation."""

__version__ = "0.1.0"
