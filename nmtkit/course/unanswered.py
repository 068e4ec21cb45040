"""Unanswered exercises and what depends on them, found before a notebook runs (the course runner's plan).

An exercise is unanswered while its work cell still raises NotImplementedError at its top level (the stub a student
copy carries: the names it should define are not there). The rule the runner follows: such a cell runs (its
NotImplementedError is expected, not a failure); after it, a later cell of the same notebook is skipped when it reads
a name that no cell run before it defined (the exercise's answers, and the names of cells skipped for that reason),
and everything else runs. Names are what a cell assigns, defines or imports, read after IPython's magics are turned
into Python; a cell that cannot be parsed is skipped after an unanswered exercise. Files an exercise would write are
outside the rule: the course's exercises compute figures, and a later cell that needed such a file fails as any
other error would. A notebook without an unanswered exercise runs whole, as before.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field


@dataclass
class Plan:
    """What the runner does with one notebook: cells expected to raise NotImplementedError, cells skipped, and each
    unanswered exercise's heading (the nearest markdown heading above it)."""
    unanswered: dict[int, str] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)


def _python(source: str) -> ast.Module | None:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except ImportError:  # no IPython: plain Python cells still parse
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _first_raise(tree: ast.Module | None) -> int | None:
    """Index of the cell's first top-level `raise NotImplementedError` (the unanswered stub), else None."""
    for k, node in enumerate(tree.body if tree else []):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                return k
    return None


def defined(tree: ast.AST) -> set[str]:
    """Names a cell binds at any depth (assignments, defs and their arguments, classes, imports, loop, with and
    except targets): a superset of what it leaves defined, so only reads of names bound nowhere count as missing."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def read(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


# what a kernel's namespace holds before any cell: Python's builtins and IPython's own names
KERNEL_NAMES = set(dir(builtins)) | {"get_ipython", "display", "In", "Out", "exit", "quit", "_", "__", "___"}


def heading(cells, index: int) -> str:
    """The nearest markdown heading above cell `index` ('' when none)."""
    for cell in reversed(cells[:index]):
        if cell.get("cell_type") == "markdown":
            lines = [line for line in "".join(cell.get("source", "")).splitlines() if line.startswith("#")]
            if lines:
                return lines[-1].lstrip("#").strip()
    return ""


def plan(cells) -> Plan:
    """The plan for a notebook's cells (nbformat cells or plain dicts)."""
    out, known = Plan(), set(KERNEL_NAMES)
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        tree = _python("".join(cell.get("source", "")))
        if out.unanswered and (tree is None or read(tree) - defined(tree) - known):
            out.skipped.append(i)
            continue
        stub = _first_raise(tree)
        if stub is not None:
            out.unanswered[i] = heading(cells, i)
            known |= defined(ast.Module(body=tree.body[:stub], type_ignores=[]))  # what runs before the raise
        elif tree is not None:
            known |= defined(tree)
    return out
