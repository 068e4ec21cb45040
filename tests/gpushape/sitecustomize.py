"""Python imports this at start-up when tests/gpushape is on PYTHONPATH: with NMTKIT_TEST_GPU_SHAPED set, the process
is GPU-shaped (gpushape_switch.py). Then any other sitecustomize on the path runs, as it would have without this one.
"""
import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("NMTKIT_TEST_GPU_SHAPED", "0") not in ("", "0"):
    import gpushape_switch

    gpushape_switch.install()

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
