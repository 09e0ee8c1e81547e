"""Rules of the architecture (issue 24) read off the code itself, not left to review."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("sdk", "plugins")

# The calls that start a task: asyncio.ensure_future, asyncio.create_task,
# loop.create_task, scope.create_task, task_group.create_task (and asyncio.Task(...)).
SPAWNERS = frozenset({"create_task", "ensure_future"})

# The only functions allowed to start a task outside a TaskScope or a TaskGroup, as
# "path::function", each with its reason. An entry that matches no call fails the test
# too: delete it.
ALLOWED = frozenset(
    {
        # TaskScope.create_task's own loop.create_task: the scope owns the task from the
        # next line (adds it to its set, cancels and awaits it at close).
        "sdk/backline/tasks.py::TaskScope.create_task",
    }
)


@dataclass(frozen=True)
class Spawn:
    """A call that starts a task no TaskScope or TaskGroup owns."""

    path: str
    line: int
    function: str  # the qualified name of the function it is in ("" at module level)

    @property
    def key(self) -> str:
        return f"{self.path}::{self.function}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line} (in {self.function or 'the module'})"


def _name(node: ast.expr) -> str | None:
    """The name an expression ends with: ``scope`` of ``self.manager.scope``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _makes(node: ast.expr | None, cls: str) -> bool:
    """Whether ``node`` is a call of ``cls`` (``TaskScope(...)``, ``asyncio.TaskGroup()``)."""
    return isinstance(node, ast.Call) and _name(node.func) == cls


def _mentions(annotation: ast.expr | None, cls: str) -> bool:
    """Whether a type annotation names ``cls`` (``TaskScope``, ``TaskScope | None``)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return cls in annotation.value
    return any(_name(n) == cls for n in ast.walk(annotation) if isinstance(n, ast.expr))


def scope_names(trees: Iterable[ast.Module]) -> frozenset[str]:
    """The names some module binds a ``TaskScope`` to: assigned one
    (``self._scope = TaskScope(...)``) or annotated as one (``scope: TaskScope``, a
    parameter too). Across modules, as a name says what a thing means
    (``self.manager.scope`` is the manager's ``self.scope = TaskScope(...)``)."""
    names: set[str | None] = set()  # (None: a target that is no name, a[0] = ...)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _makes(node.value, "TaskScope"):
                names.update(_name(target) for target in node.targets)
            elif isinstance(node, ast.AnnAssign) and (
                _mentions(node.annotation, "TaskScope") or _makes(node.value, "TaskScope")
            ):
                names.add(_name(node.target))
            elif isinstance(node, ast.arg) and _mentions(node.annotation, "TaskScope"):
                names.add(node.arg)
    return frozenset(n for n in names if n is not None)


def _starts_task(func: ast.expr) -> bool:
    if _name(func) in SPAWNERS:
        return True
    if isinstance(func, ast.Attribute) and func.attr == "Task":  # asyncio.Task(coro)
        return _name(func.value) == "asyncio"
    return False


class _Scan(ast.NodeVisitor):
    """Finds the spawning calls of one module that no scope or task group owns."""

    def __init__(self, path: str, scopes: frozenset[str]) -> None:
        self.path = path
        self.scopes = scopes
        self.groups: list[str] = []  # bound by an enclosing `async with TaskGroup() as x`
        self.where: list[str] = []
        self.found: list[Spawn] = []

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _enter

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        bound = [
            item.optional_vars.id
            for item in node.items
            if _makes(item.context_expr, "TaskGroup") and isinstance(item.optional_vars, ast.Name)
        ]
        for item in node.items:
            self.visit(item)
        self.groups.extend(bound)  # only inside the block: a group that has ended takes none
        for statement in node.body:
            self.visit(statement)
        del self.groups[len(self.groups) - len(bound) :]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if _starts_task(func) and not self._owned(func):
            self.found.append(Spawn(self.path, node.lineno, ".".join(self.where)))
        self.generic_visit(node)

    def _owned(self, func: ast.expr) -> bool:
        if not (isinstance(func, ast.Attribute) and func.attr == "create_task"):
            return False  # a bare create_task, any ensure_future, asyncio.Task(...)
        owner = _name(func.value)  # None for a call: get_running_loop().create_task
        return owner is not None and (owner in self.scopes or owner in self.groups)


def unowned_tasks(sources: Mapping[str, str]) -> list[Spawn]:
    """The calls of ``sources`` (path -> code) that start a task outside a ``TaskScope``
    (``x.create_task`` where ``x`` names a scope) or an ``asyncio.TaskGroup`` (inside its
    ``async with``)."""
    trees = {path: ast.parse(code, filename=path) for path, code in sources.items()}
    scopes = scope_names(trees.values())
    found: list[Spawn] = []
    for path, tree in trees.items():
        scan = _Scan(path, scopes)
        scan.visit(tree)
        found.extend(scan.found)
    return found


def _sources() -> Iterator[tuple[str, str]]:
    for top in SCANNED:
        for file in sorted((REPO / top).rglob("*.py")):
            yield file.relative_to(REPO).as_posix(), file.read_text(encoding="utf-8")


def test_every_task_is_started_in_a_task_scope() -> None:
    found = unowned_tasks(dict(_sources()))
    unowned = [str(s) for s in found if s.key not in ALLOWED]
    assert not unowned, (
        "tasks started outside a TaskScope or an asyncio.TaskGroup (give each an owner: "
        "scope.create_task(...), the scope closed on its owner's close path):\n  "
        + "\n  ".join(unowned)
    )
    stale = sorted(ALLOWED - {s.key for s in found})
    assert not stale, f"allow-list entries that match no call (delete them): {stale}"


SNIPPET = """
import asyncio
from backline.tasks import TaskScope

class Owner:
    def __init__(self) -> None:
        self._scope = TaskScope("owner")
        self.later: TaskScope | None = None

    async def run(self, loop, given: TaskScope) -> None:
        self._scope.create_task(work())
        self.later.create_task(work())
        given.create_task(work())
        async with asyncio.TaskGroup() as tg:
            tg.create_task(work())
        tg.create_task(work())  # flagged: its group has ended
        asyncio.ensure_future(work())  # flagged
        asyncio.create_task(work())  # flagged
        loop.create_task(work())  # flagged
        asyncio.get_running_loop().create_task(work())  # flagged
        asyncio.Task(work())  # flagged
        self._scope.ensure_future(work())  # flagged: not a scope's method

def helper(scope):
    scope.create_task(work())  # flagged: only a name bound to a TaskScope is one
"""


def test_the_scan_flags_bare_tasks_and_accepts_scopes_and_task_groups() -> None:
    flagged = [n for n, line in enumerate(SNIPPET.splitlines(), 1) if "# flagged" in line]
    found = unowned_tasks({"snippet.py": SNIPPET})
    assert [s.line for s in found] == flagged
    assert {s.function for s in found} == {"Owner.run", "helper"}


MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A module past ~600 lines does more than one job: split it along its
    responsibilities (never just to fit)."""
    long = sorted(
        f"{path.relative_to(REPO)} ({n} lines)"
        for root in SCANNED
        for path in (REPO / root).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    )
    assert not long, f"modules over {MAX_LINES} lines: " + ", ".join(long)
