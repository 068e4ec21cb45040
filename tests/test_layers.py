"""The layers of docs/architecture.md hold in the code: no module imports from a layer above its own.

The ordered list of layers is read from the doc's `layers` block (written once, there). Every import counts, those
inside functions too. `import nmtkit` alone (the package: it selects Keras 2 and loads names lazily) is exempt.
"""
import ast
import re
import subprocess
from pathlib import Path

import pytest

from nmtkit.course import INSTRUCTOR_KIT

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "nmtkit"
# the package and what sits above it: the benchmarks and the instructor's tools use the kit, never the other way
SOURCES = [p for d in (PKG, ROOT / "tools", ROOT / "bench") for p in sorted(d.rglob("*.py"))]
TOP = ("nmtkit.", "tools.", "bench.")


def layers() -> list[list[str]]:
    """[[path prefix, ...] per layer, top first] from the ```layers block of docs/architecture.md."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```layers\n(.*?)\n```", doc, re.S)
    assert block, "docs/architecture.md lost its ```layers block"
    out = []
    for line in block.group(1).splitlines():
        m = re.match(r"\s*\d+\.\s+[\w -]+:\s+(.*)", line)
        if m:
            out.append(m.group(1).split())
    return out


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def module_file(name: str) -> str | None:
    """nmtkit.a.b -> 'nmtkit/a/b.py' or 'nmtkit/a/b/__init__.py' if it exists."""
    base = ROOT / Path(*name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return str(f.relative_to(ROOT))
    return None


def imports(path: Path) -> set[str]:
    """The modules of nmtkit/, tools/ and bench/ `path` imports anywhere in it (functions included), by file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if module_file(f"{node.module}.{a.name}") else node.module
                     for a in node.names]
        for n in names:
            if n.startswith(TOP) and module_file(n):
                out.add(module_file(n))
    return out


def layer_of(file: str, table: list[list[str]]) -> int:
    best = None
    for i, prefixes in enumerate(table):
        for p in prefixes:
            if file == p or (p.endswith("/") and file.startswith(p)):
                if best is None or len(p) > best[1]:
                    best = (i, len(p))
    assert best is not None, f"{file} is in no layer of docs/architecture.md: add it to the layers block"
    return best[0]


def upward_imports(table) -> list[str]:
    bad = []
    for path in SOURCES:
        me = str(path.relative_to(ROOT))
        mine = layer_of(me, table)
        for other in sorted(imports(path)):
            if layer_of(other, table) < mine:  # a smaller index is a higher layer
                bad.append(f"{me} (layer {mine + 1}) imports {other} (layer {layer_of(other, table) + 1})")
    return bad


def test_every_module_is_in_a_layer_and_imports_only_down():
    assert upward_imports(layers()) == []


def test_the_check_catches_an_upward_import(tmp_path, monkeypatch):
    # the same walk over a copy of the layer table in which analysis sits above the course: analysis' own imports
    # of nothing above it stay legal, while the course's imports of analysis become upward ones
    table = layers()
    course = next(i for i, row in enumerate(table) if "nmtkit/course/" in row)
    analysis = next(i for i, row in enumerate(table) if "nmtkit/analysis/" in row)
    assert course < analysis
    swapped = [list(row) for row in table]
    swapped[course].remove("nmtkit/course/")
    swapped[analysis].append("nmtkit/course/")
    swapped[analysis].remove("nmtkit/analysis/")
    swapped[course].append("nmtkit/analysis/")
    assert any("nmtkit/course/" in b for b in upward_imports(swapped))


# the calls that decide how training is distributed, as Horovod's own examples tag them: start, average, broadcast,
# gather, compress
DECISIONS = re.compile(r"hvd\.(init|allreduce|broadcast_variables|allgather_object|allgather|DistributedGradientTape|"
                       r"DistributedOptimizer|Compression)\b")


def horovod_tags() -> list[tuple[str, int, str]]:
    """(file, line, text) of every `# Horovod:` comment in the kit, the tools and the benchmarks."""
    return [(str(path.relative_to(ROOT)), i + 1, line.split("# Horovod:", 1)[1].strip())
            for path in SOURCES for i, line in enumerate(path.read_text().splitlines()) if "# Horovod:" in line]


def test_horovod_tags_mark_the_decisions_and_say_why():
    # `# Horovod:` on each decision, as in Horovod's examples (grep shows where training touches Horovod); a tag on
    # every hvd line bred filler ("see above", "and CUDA"): a tag is a sentence that says what is decided
    untagged = []
    for rel in ("nmtkit/training/dist.py", "nmtkit/cluster/remote.py"):
        lines = (ROOT / rel).read_text().splitlines()
        in_doc = False
        for i, line in enumerate(lines):
            code = line.split("#")[0]
            if code.count('"""') % 2:
                in_doc = not in_doc
                continue
            if not in_doc and DECISIONS.search(code) and not code.lstrip().startswith(("'", '"')):
                if "# Horovod:" not in line and "# Horovod:" not in lines[i - 1]:
                    untagged.append(f"{rel}:{i + 1}: {line.strip()}")
    assert not untagged, untagged
    tags = horovod_tags()
    filler = [f"{f}:{n}: {t}" for f, n, t in tags if len(t.split()) < 4 or t.lower().startswith(("see ", "and "))]
    assert len(tags) >= 8 and not filler, filler


def test_no_function_over_60_lines_and_no_file_over_400():
    long = []
    assert any("bench" in p.parts for p in SOURCES) and (any("tools" in p.parts for p in SOURCES) or not INSTRUCTOR_KIT)
    for path in SOURCES:
        text = path.read_text()
        if len(text.splitlines()) > 400:
            long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1}")
    assert not long, long


def test_package_inits_in_one_style():
    """Every package's __init__: a docstring naming each of its modules, then at most plain re-exports, each listed
    once in __all__, and constants (no lazy __getattr__ but the front door's, no functions)."""
    bad = []
    for init in sorted(PKG.rglob("__init__.py")):
        if init.parent == PKG:
            continue  # the front door: lazy on purpose (tests/test_front_door.py)
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree) or ""
        rel = init.relative_to(ROOT)
        modules = [p.name for p in init.parent.glob("*.py") if p.name != "__init__.py"]
        bad += [f"{rel}: the docstring does not name {m}" for m in modules if m not in doc]
        names, listed = [], []
        for node in tree.body[1:]:
            if isinstance(node, ast.ImportFrom):
                names += [a.asname or a.name for a in node.names]
            elif isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]:
                listed = [e.value for e in node.value.elts]
            elif isinstance(node, ast.Assign) and all(t.id.isupper() for t in node.targets):
                pass  # a constant of the package (nmtkit.course.INSTRUCTOR_KIT, the probe of the instructor's half)
            elif not isinstance(node, ast.Import):
                bad.append(f"{rel}:{node.lineno}: {type(node).__name__}: only imports, constants and __all__ here")
        if names and sorted(listed) != sorted(set(names)):
            bad.append(f"{rel}: __all__ {listed} is not the names it imports, each once: {sorted(set(names))}")
    assert not bad, bad


def test_the_readme_layout_names_every_top_level_folder():
    """README.md's Layout section names each folder of the repository (a new one, e.g. tools/, is described)."""
    if not INSTRUCTOR_KIT:
        pytest.skip("a student release: its README is docs/students-readme.md, which has no Layout of the repository")
    text = (ROOT / "README.md").read_text()
    layout = re.search(r"## Layout\n(.*?)\n## ", text, re.S)
    assert layout, "README.md lost its Layout section"
    # the repository's folders: git's tracked files where it is a checkout (set-up's nmtkit.egg-info, runs'
    # workspace/ and caches are git-ignored), else every folder but those
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True)
    if tracked.returncode == 0 and tracked.stdout:
        folders = {f.split("/")[0] for f in tracked.stdout.splitlines() if "/" in f and not f.startswith(".")}
    else:
        skip = {"workspace", "__pycache__", "node_modules", "nmtkit.egg-info", "runs", "student"}
        folders = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name not in skip}
    assert {"nmtkit", "tests"} <= folders
    missing = sorted(f for f in folders if f"{f}/" not in layout.group(1))
    assert not missing, missing
