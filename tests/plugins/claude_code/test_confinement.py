"""Claude Code stays in its working directory (issue 13, item 1): the real CLI, asked
by a scripted model to reach outside, is refused, and nothing outside leaks or changes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code.confine import FolderGuard

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import Harness, requires_cli

SECRET = "TOPSECRET-7f3a"
HOME_SECRET = "HOMESECRET-91c2"


def _outside_world(h: Harness) -> dict[str, Path]:
    """A secret folder next to the repository, a secret in the CLI's home, and
    symlinks inside the repository that lead out."""
    outside = h.cwd.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "victim.txt").write_text("untouched\n")
    home = Path(h.config.env["HOME"])
    (home / "homesecret.txt").write_text(HOME_SECRET + "\n")
    (h.cwd / "outlink").symlink_to(outside)
    (h.cwd / "secret-link.txt").symlink_to(outside / "secret.txt")
    (h.cwd / "inside.txt").write_text("inside\n")
    return {"outside": outside, "home": home}


def _escapes(h: Harness, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("Read", {"file_path": str(outside / "secret.txt")}),  # absolute path outside
        ("Read", {"file_path": "../outside/secret.txt"}),  # ..
        ("Read", {"file_path": str(h.cwd / "outlink" / "secret.txt")}),  # symlinked folder
        ("Read", {"file_path": "secret-link.txt"}),  # symlinked file
        ("Read", {"file_path": "~/homesecret.txt"}),  # ~
        ("Write", {"file_path": str(outside / "created.txt"), "content": "x"}),
        ("Write", {"file_path": "../escaped.txt", "content": "x"}),
        ("Write", {"file_path": str(h.cwd / "outlink" / "via-link.txt"), "content": "x"}),
        ("Write", {"file_path": "~/in-home.txt", "content": "x"}),
        ("Glob", {"pattern": "*", "path": str(outside)}),
        ("Glob", {"pattern": str(outside) + "/*"}),
        ("Glob", {"pattern": "../outside/*"}),
        ("Grep", {"pattern": "SECRET", "path": str(outside), "output_mode": "content"}),
        ("Grep", {"pattern": "SECRET", "path": "outlink", "output_mode": "content"}),
        ("Grep", {"pattern": "SECRET", "path": "~", "output_mode": "content"}),
    ]


@requires_cli
@pytest.mark.timeout(120)
async def test_every_escape_route_is_refused_and_nothing_outside_leaks_or_changes(
    harness_factory: Callable[..., Any],
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    def coder(request: fa.AnthropicRequest) -> Any:
        if not request.tool_results and not calls:
            calls.extend(_escapes(h, world["outside"]))
            # The CLI itself refuses to edit a file it has not read (and reading is refused).
            edit = (
                "Edit",
                {
                    "file_path": str(world["outside"] / "victim.txt"),
                    "old_string": "un",
                    "new_string": "",
                },
            )
            controls = [
                edit,
                ("Read", {"file_path": "inside.txt"}),
                ("Write", {"file_path": str(h.cwd / "made-inside.txt"), "content": "ok\n"}),
                ("Grep", {"pattern": "inside", "path": str(h.cwd), "output_mode": "content"}),
            ]
            return fa.tool_calls(*calls, *controls)
        return fa.text("Done trying.")

    h: Harness = await harness_factory(coder)
    world = _outside_world(h)
    await h.session.run(user_input="cc: look around", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "look around", "the task to end")

    # Nothing outside was created or changed.
    outside = world["outside"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "victim.txt"]
    assert (outside / "victim.txt").read_text() == "untouched\n"
    assert not (h.cwd.parent / "escaped.txt").exists()
    assert not (world["home"] / "in-home.txt").exists()
    # No secret reached the model, in any request.
    everything = json.dumps([r.body for r in h.world.server.requests])
    assert SECRET not in everything and HOME_SECRET not in everything
    # Each escape got a refusal the model reads; the controls inside worked.
    results = {r["tool_use_id"]: r for r in h.world.coder_requests[1].tool_results}
    assert len(results) == len(calls) + 4
    refused = [r for r in results.values() if "outside the working directory" in str(r)]
    assert len(refused) == len(calls), "\n".join(
        str(r) for r in results.values() if r not in refused
    )
    assert all(r.get("is_error") for r in refused)
    assert str(h.cwd) in str(refused[0]["content"])  # it names the folder it may use
    assert (h.cwd / "made-inside.txt").read_text() == "ok\n"
    assert any("inside" in str(r["content"]) and not r.get("is_error") for r in results.values())
    # The state says calls were refused; a refused write is no changed file.
    assert h.state["files_changed"] == ["made-inside.txt"]
    assert any(a.startswith("refused a Write") for a in h.state["recent_activity"])


@requires_cli
@pytest.mark.timeout(120)
async def test_notebook_edit_and_bash_stay_in_the_folder(
    harness_factory: Callable[..., Any],
) -> None:
    h: Harness = await harness_factory(
        lambda r: (
            fa.text("done")
            if r.tool_results
            else fa.tool_calls(
                ("Read", {"file_path": str(h.cwd.parent / "nb.ipynb")}),
                ("NotebookEdit", {"notebook_path": "../nb.ipynb", "new_source": "x"}),
                ("Bash", {"command": "mkdir -p sub && cd sub"}),
                ("Bash", {"command": "pwd > bash-cwd.txt"}),
            )
        ),
        allowed_tools=("Read", "NotebookEdit"),
        allow_bash=True,
    )
    (h.cwd.parent / "nb.ipynb").write_text(json.dumps({"cells": [], "nbformat": 4}))
    await h.session.run(user_input="cc: edit the notebook", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "edit the notebook", "the task to end")
    assert json.loads((h.cwd.parent / "nb.ipynb").read_text())["cells"] == []
    read, edit, *_ = h.world.coder_requests[1].tool_results
    assert "outside the working directory" in str(read["content"])
    assert edit.get("is_error")
    # Bash is a shell (not confined), but each command starts in the folder.
    assert (h.cwd / "bash-cwd.txt").read_text().strip() == str(h.cwd)


# -- the rule itself ------------------------------------------------------------------------
@pytest.fixture
def guard(tmp_path: Path) -> FolderGuard:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    (root / "loop").symlink_to(root / "loop")
    permitted = ["Read", "Write", "Glob", "Grep", "NotebookEdit", "Fetch"]
    return FolderGuard(root, tmp_path / "home", permitted)


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Read", {"file_path": "src/app.py"}),
        ("Read", {"file_path": "src/../src/app.py"}),
        ("Write", {"file_path": "new/dir/file.txt"}),
        ("Glob", {"pattern": "**/*.py"}),
        ("Glob", {"pattern": "a..b/*.py"}),
        ("Grep", {"pattern": "x", "glob": "*.py"}),
        ("Grep", {"pattern": "x", "path": "."}),
        ("Fetch", {"url": "https://example.com/../x"}),  # not a path: not checked
    ],
)
def test_the_guard_allows_paths_inside(
    guard: FolderGuard, tool: str, tool_input: dict[str, Any]
) -> None:
    assert guard.check(tool, tool_input) is None


@pytest.mark.parametrize(
    ("tool", "tool_input", "says"),
    [
        ("Read", {"file_path": "/etc/passwd"}, "outside the working directory"),
        ("Read", {"file_path": "out/secret"}, "it leads to"),
        ("Read", {"file_path": "~root/.ssh/id_rsa"}, "outside"),
        ("Read", {"file_path": "~"}, "outside"),
        ("Read", {"file_path": "src/\x00"}, "outside"),
        ("Read", {"file_path": ["a"]}, "must be a path"),
        ("Write", {"file_path": "src/../../x"}, "outside"),
        ("NotebookEdit", {"notebook_path": "../nb.ipynb", "new_source": ""}, "outside"),
        ("Glob", {"pattern": "{..,src}/*"}, "uses '..'"),
        ("Glob", {"pattern": "/etc/*"}, "outside"),
        ("Glob", {"pattern": "~/**"}, "outside"),
        ("Grep", {"pattern": "x", "path": "/"}, "outside"),
        ("Fetch", {"url": "x", "target_path": "/tmp/x"}, "outside"),  # any *_path argument
        ("Bash", {"command": "ls"}, "not available here"),
    ],
)
def test_the_guard_refuses_paths_outside_and_tools_not_given(
    guard: FolderGuard, tool: str, tool_input: dict[str, Any], says: str
) -> None:
    reason = guard.check(tool, tool_input)
    assert reason is not None and says in reason


def test_the_guard_does_not_hang_on_a_symlink_loop(guard: FolderGuard) -> None:
    assert guard.check("Read", {"file_path": "loop/x"}) is None  # stays inside, fails later
