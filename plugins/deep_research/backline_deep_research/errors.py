"""Why a page was not read: ``FetchError``, and ``HostRefused`` for an address the
fetcher will not connect to (``hosts.py``)."""

from __future__ import annotations


class FetchError(Exception):
    """A page could not be read; the message says why (for the round's notes)."""


class HostRefused(FetchError):
    """The host is, or resolves to, an address the fetcher does not reach: loopback,
    private, link-local, multicast, unspecified or reserved (unless private hosts are
    allowed). Raised before any connection is made."""
