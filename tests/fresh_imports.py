"""For each kit submodule: import it first, then resolve every front-door name; print what differs, as JSON.

One child per submodule, forked from a parent that imported only `nmtkit` (which imports no submodule) and the
third-party modules the front door needs, so each child starts with no kit submodule loaded. Run by
tests/test_front_door.py; prints {"modules": N, "bad": {module: [names]}} as its last line.
"""
import importlib
import json
import os
import sys
from pathlib import Path

import nmtkit as nk

ROOT = Path(nk.__file__).parent


def kit_modules() -> list[str]:
    """Every module under nmtkit/ but the shipped reference data, from the files (importing would load them)."""
    names = {".".join(("nmtkit",) + p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
             for p in ROOT.rglob("*.py") if "reference" not in p.relative_to(ROOT).parts}
    return sorted(names - {"nmtkit", "nmtkit.__main__"})


def mismatches() -> list[str]:
    bad = []
    for name in nk.__all__:
        module, attr = nk._FRONT[name]
        if getattr(nk, name) is not getattr(importlib.import_module(module), attr):
            bad.append(name)
    return bad


def in_child(fn) -> tuple[int, str]:
    """fn() in a forked child: (its exit status, what it wrote)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            code, out = 0, fn()
        except BaseException as e:  # noqa: BLE001  reported, not raised: the parent goes on with the next module
            code, out = 1, f"{type(e).__name__}: {e}"
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode()


def main() -> int:
    # the third-party modules resolving every name loads, learnt in a child and then loaded here
    code, loaded = in_child(lambda: mismatches() and "" or "\n".join(m for m in sys.modules if "nmtkit" not in m))
    for name in loaded.split():
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001  a module that only loads as a side effect of another: skipped, it loads in the child
                pass
    assert not [m for m in sys.modules if m.startswith("nmtkit.")], "the parent must not hold a kit submodule"
    bad = {}
    modules = kit_modules()
    for module in modules:
        code, out = in_child(lambda: (importlib.import_module(module), ",".join(mismatches()))[1])
        if code or out:
            bad[module] = out
    print(json.dumps({"modules": len(modules), "bad": bad}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
