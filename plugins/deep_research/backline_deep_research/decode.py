"""Decoding a response body without trusting its size: ``Content-Encoding`` (gzip,
deflate) undone step by step, each step's output bounded.

A few hundred bytes of ``Content-Encoding: gzip, gzip`` can inflate to gigabytes. So
nothing is inflated in one call: each ``decompress`` produces at most ``CHUNK``
bytes (the rest of its input waits in ``unconsumed_tail``), every layer's output is
counted as it is produced and stops at the cap, and at most ``MAX_ENCODINGS``
encodings are undone. ``ContentDecoder.feed`` is a generator of small steps, so the
caller can give the event loop its turn between them (``fetch.read_capped``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from .errors import FetchError

CHUNK = 64 * 1024
"""The most bytes one decompression step produces."""
MAX_ENCODINGS = 2
"""The most content encodings undone (``gzip, gzip`` is the most a page needs)."""
ACCEPT_ENCODING = "gzip, deflate"
"""What the fetcher asks for: the encodings it can undo in bounded steps."""


class _Inflater:
    """One gzip or deflate layer, inflated at most ``CHUNK`` bytes per step."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._inflater: zlib._Decompress | None = (
            zlib.decompressobj(zlib.MAX_WBITS | 16) if encoding == "gzip" else None
        )
        self._head = b""  # deflate: the first bytes, until its format is known
        self.finished = False

    def _ready(self, data: bytes) -> tuple[zlib._Decompress | None, bytes]:
        if self._inflater is not None:
            return self._inflater, data
        # "deflate" is zlib-wrapped by the RFC, raw in practice: the header tells.
        data = self._head + data
        if len(data) < 2:
            self._head = data
            return None, b""
        zlib_header = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        self._head = b""
        return self._inflater, data

    def steps(self, data: bytes) -> Iterator[bytes]:
        """Inflate ``data``: one bounded output per step (``b""`` for a step without any)."""
        if self.finished:
            return  # data after the end of the stream is ignored (as httpx does)
        inflater, data = self._ready(data)
        if inflater is None:
            return
        while True:
            try:
                out = inflater.decompress(data, CHUNK)
            except zlib.error as e:
                raise FetchError(f"could not decode the {self.encoding} body: {e}") from None
            data = inflater.unconsumed_tail
            yield out
            if inflater.eof:
                self.finished = True
                return
            if not data and not out:  # input used up and nothing pending
                return

    def end(self) -> bytes:
        """What is left once the body has ended (bounded: no input is pending)."""
        if self._inflater is None or self.finished:
            return b""
        try:
            return self._inflater.flush()
        except zlib.error as e:
            raise FetchError(f"could not decode the {self.encoding} body: {e}") from None


class ContentDecoder:
    """Undoes a response's ``Content-Encoding``, counting every layer's output against
    ``cap`` (``FetchError`` as soon as one goes over)."""

    def __init__(self, content_encoding: str, cap: int) -> None:
        names = [e.strip().lower() for e in content_encoding.split(",")]
        names = [e for e in names if e and e != "identity"]
        if len(names) > MAX_ENCODINGS:
            raise FetchError(
                f"too many content encodings ({', '.join(names)}; at most {MAX_ENCODINGS})"
            )
        layers: list[_Inflater] = []
        for name in reversed(names):  # the last encoding applied is undone first
            if name in ("gzip", "x-gzip"):
                layers.append(_Inflater("gzip"))
            elif name == "deflate":
                layers.append(_Inflater("deflate"))
            else:
                raise FetchError(f"unsupported content encoding {name!r}")
        self.layers = layers
        self.cap = cap
        self.produced = [0] * len(layers)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decode one piece of the body: yields decoded pieces, and ``b""`` after a
        step that produced nothing yet (a point where the caller may pause)."""
        yield from self._through(0, data)

    def finish(self) -> Iterator[bytes]:
        """The rest, once the body has ended."""
        for i, layer in enumerate(self.layers):
            rest = layer.end()
            if rest:
                yield from self._through(i + 1, self._count(i, rest))

    def _through(self, index: int, data: bytes) -> Iterator[bytes]:
        if index == len(self.layers):
            yield data
            return
        for out in self.layers[index].steps(data):
            if out:
                yield from self._through(index + 1, self._count(index, out))
            else:
                yield b""

    def _count(self, index: int, out: bytes) -> bytes:
        self.produced[index] += len(out)
        if self.produced[index] > self.cap:
            raise FetchError(f"too large (over the {self.cap}-byte cap once decoded)")
        return out
