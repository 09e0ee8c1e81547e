"""What the HTTP providers share: a JSON request with a timeout and a clear error."""

from __future__ import annotations

from typing import Any

import httpx

TIMEOUT = 20.0


class SearchError(Exception):
    """A search failed; the message says why."""


async def request_json(
    method: str,
    url: str,
    *,
    params: dict[str, Any] | None = None,
    json: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> Any:
    """The decoded JSON body of one request; ``SearchError`` on any failure."""
    try:
        async with httpx.AsyncClient(timeout=timeout) as client:
            response = await client.request(method, url, params=params, json=json, headers=headers)
    except httpx.HTTPError as e:
        raise SearchError(f"{type(e).__name__}: {e}".rstrip(": ")) from None
    if response.status_code != 200:
        raise SearchError(f"HTTP {response.status_code} from {url}: {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise SearchError(f"{url} did not answer with JSON") from None


def text_of(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
