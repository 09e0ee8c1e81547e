"""The SDK's version (one place; ``backline.__version__`` re-exports it)."""

__version__ = "0.1.0"
