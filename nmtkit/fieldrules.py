"""A dataclass field that carries its own rule: `x: int = rule(600, ge=1, doc="...")`.

The rule (allowed choices, or bounds) and the meaning sit at the field, in its metadata, so that validation, a
CLI's `choices` and generated docs read the same declaration (nmtkit.config uses it for every config value).
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, field

from nmtkit.errors import ConfigError


@dataclass(frozen=True)
class Rule:
    """What values a field accepts: one of `choices`, or a number within the bounds given."""
    choices: tuple = ()
    ge: float | None = None
    gt: float | None = None
    lt: float | None = None

    def text(self) -> str:
        """The rule in words, as docs/config.md shows it: "one of a, b", ">= 1", "in [0, 1)", "> 0" ("" = any)."""
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        low = f"[{self.ge}" if self.ge is not None else f"({self.gt}" if self.gt is not None else ""
        if low and self.lt is not None:
            return f"in {low}, {self.lt})"
        if low:
            return (">= " if low[0] == "[" else "> ") + low[1:]
        return f"< {self.lt}" if self.lt is not None else ""

    def problem(self, value) -> str | None:
        """None if `value` is allowed, else what a ConfigError says about it."""
        if self.choices:
            return None if value in self.choices else f"choose {self.text()}"
        if not self.text():
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number {self.text()}"  # set by hand in a notebook, e.g. cfg.train.steps = "5"
        if ((self.ge is not None and value < self.ge) or (self.gt is not None and value <= self.gt)
                or (self.lt is not None and value >= self.lt)):
            return f"must be {self.text()}"
        return None


def rule(default, *, choices: tuple = (), ge=None, gt=None, lt=None, doc: str = ""):
    """A dataclass field with its rule and its meaning (`doc`) in the field's metadata."""
    return field(default=default, metadata={"rule": Rule(tuple(choices), ge, gt, lt), "doc": doc})


class RuleRow(typing.NamedTuple):
    """One config value in docs/config.md (nmtkit.config.rules())."""
    key: str        # section.name
    type: str       # int, float, str or bool
    default: object
    rule: str       # Rule.text(): "" when any value of the type will do
    doc: str


class Settled:
    """A config section that can be frozen once a run settled it (Config.freeze): assigning to it then is an
    error, where a silent change would differ from the config.json the run recorded."""

    def __setattr__(self, name, value):
        if self.__dict__.get("_frozen"):
            raise ConfigError(f"{type(self).__name__}.{name}: this config is settled for a run and frozen; change "
                              f"a copy instead, e.g. cfg.with_overrides({{'<section>.{name}': ...}})")
        object.__setattr__(self, name, value)

    def freeze(self):
        """Settled for a run (budget, cluster, data dir): no assignment from here on, in its sections either;
        copies (with_overrides, from_dict) are not frozen. Returns self."""
        object.__setattr__(self, "_frozen", True)
        for value in vars(self).values():
            if isinstance(value, Settled):
                value.freeze()
        return self
