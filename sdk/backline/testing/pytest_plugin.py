"""pytest fixtures for backline (registered through the ``pytest11`` entry point).

- ``scripted_llm``: an empty ``ScriptedLLM``; ``push()`` responses onto it.
- ``fake_anthropic``: a running ``FakeAnthropicServer`` on 127.0.0.1.
- ``virtual_clock``: the test's event loop on virtual time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .clock import VirtualClock
    from .fake_anthropic import FakeAnthropicServer
    from .scripted_llm import ScriptedLLM


@pytest.fixture
def scripted_llm() -> ScriptedLLM:
    from .scripted_llm import ScriptedLLM

    return ScriptedLLM()


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropicServer]:
    from .fake_anthropic import FakeAnthropicServer

    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
async def virtual_clock() -> AsyncIterator[VirtualClock]:
    from .clock import virtual_clock as _virtual_clock

    with _virtual_clock() as clock:
        yield clock
