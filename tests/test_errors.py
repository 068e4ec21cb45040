"""One error class per wing: every module imported, NmtkitError's subclasses counted recursively."""
import builtins
import importlib
import inspect
import pkgutil

import nmtkit
from nmtkit.errors import NmtkitError


def _modules():
    for info in pkgutil.walk_packages(nmtkit.__path__, "nmtkit."):
        if not info.name.endswith("__main__"):
            yield importlib.import_module(info.name)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_at_most_twelve_error_classes_none_shadowing_a_builtin_and_no_alias():
    modules = list(_modules())  # importing every module defines every class there is
    kit = {c for c in _subclasses(NmtkitError) if c.__module__.startswith("nmtkit.")} | {NmtkitError}
    assert 10 <= len(kit) <= 12, sorted(c.__qualname__ for c in kit)
    assert not [c.__name__ for c in kit if hasattr(builtins, c.__name__)]
    assert {c.__module__ for c in kit} == {"nmtkit.errors"}  # declared in one place
    aliases = []
    for mod in modules:  # no name bound to a kit error under another name (`LineCountError = DataError`)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and obj in kit and name != obj.__name__:
                aliases.append(f"{mod.__name__}.{name} = {obj.__name__}")
    assert not aliases, aliases


def test_every_wing_error_carries_advice_as_its_whole_story():
    from nmtkit import errors
    for cls in (getattr(errors, n) for n in dir(errors)):
        if inspect.isclass(cls) and issubclass(cls, NmtkitError):
            assert cls.__doc__ and len(cls.__doc__) > 30, cls
