"""Tables for people: every number column in one format, every unit in its header, nothing nested.

    readable(df)                          # a frame's numbers formatted column by column (seconds stay seconds)
    evidence_table({"run": evidence})     # a question's evidence: one row per quantity, its unit in the row's name

The analysis keeps its evidence as flat dicts of raw floats (report.json); these only decide how they are shown.
"""
from __future__ import annotations

import math

import pandas as pd

NA = "n/a"

# a key's ending -> (the name's stem to keep, the unit); the longest ending that matches wins
_SUFFIX_UNITS = {
    "_mbit_s": "Mbit/s", "_Bps": "B/s", "_gbps": "Gbit/s", "_ms": "ms", "_s": "s", "_mb": "MB", "_mib": "MiB",
    "_bytes": "B", "_hours": "h", "_percent": "%", "_mbit": "Mbit",
}
_KEY_UNITS = {  # whole keys whose unit their ending does not say
    "bytes": "B", "steps_per_s": "steps/s", "peak_flops": "FLOP/s", "projected_cost": "USD",
    "price_per_node_hour": "USD/node-hour", "remaining_s_to_planned": "s", "busy_share": "fraction",
    "proc_cpu_mean": "% of a core",
}
_NESTED_UNITS = {("devices", "mean"): "%"}  # a record's field whose unit its list says
_ID_FIELDS = ("host", "file", "device", "rank")  # what names an item of a list of records


def unit_of(key: str) -> tuple[str, str]:
    """(the key without its unit ending, the unit or "")."""
    if key in _KEY_UNITS:
        return key, _KEY_UNITS[key]
    for end in sorted(_SUFFIX_UNITS, key=len, reverse=True):
        if key.endswith(end) and len(key) > len(end):
            return key[: -len(end)], _SUFFIX_UNITS[end]
    return key, ""


def labelled(key: str) -> str:
    """A key as a header: "elapsed_s" -> "elapsed (s)", "mean_Bps" -> "mean (B/s)"; no unit: the key itself."""
    stem, unit = unit_of(key)
    return f"{stem} ({unit})" if unit else key


def flatten(ev: dict, prefix: str = "") -> dict:
    """Nested evidence as flat scalars: dicts as "key.sub", lists of records as "key 1: sub" (position, so runs'
    rows align), lists of scalars joined with ", "."""
    out = {}
    for k, v in ev.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{name}."))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, dict) for x in v):
            for i, rec in enumerate(v, 1):
                ids = [f for f in _ID_FIELDS if f in rec]
                order = ids + [f for f in rec if f not in ids]  # the item's name first
                out.update(flatten({f: rec[f] for f in order}, f"{name} {i}: "))
        elif isinstance(v, (list, tuple)):
            out[name] = ", ".join(_scalar_text(x) for x in v)
        else:
            out[name] = v.item() if hasattr(v, "item") else v
    return out


def _scalar_text(x) -> str:
    return format_numbers([x])[0] if _is_number(x) else str(x)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def format_numbers(values) -> list[str]:
    """One format for numbers that sit together (a column, or a row across runs): integers with thousands
    separators; else fixed decimals, as many as give the smallest non-zero 4 significant digits (at most 6), or one
    scientific form when that is under 1e-4. NaN and None: "n/a"."""
    finite = [float(v) for v in values if _is_number(v) and math.isfinite(float(v))]
    if all(v.is_integer() and abs(v) < 1e15 for v in finite):
        fmt = "{:,.0f}"
    else:
        low = min(abs(v) for v in finite if v != 0)
        if low < 1e-4:
            fmt = "{:.3e}"
        else:
            fmt = "{:,.%df}" % min(max(3 - math.floor(math.log10(low)), 0), 6)
    return [fmt.format(float(v)) if _is_number(v) and math.isfinite(float(v)) else _text(v) for v in values]


def _text(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return NA
    return str(v)


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """A table for people: each float column in one format (format_numbers), epoch times as seconds since the
    first row ("time since start (s)"), seconds kept in seconds under their "(s)" header. Integer columns stay
    numbers (one format already; code may read them)."""
    out = df.copy()
    for col in list(out.columns):
        if pd.api.types.is_integer_dtype(out[col]) and col != "time":
            continue
        values = out[col].tolist()
        if not any(_is_number(v) for v in values) or not all(_is_number(v) or _text(v) == NA for v in values):
            continue  # text, flags, or mixed: as they are
        if col == "time":
            first = min(float(v) for v in values if _is_number(v))
            values = [float(v) - first if _is_number(v) else v for v in values]
            out = out.rename(columns={"time": "time since start (s)"})
            col = "time since start (s)"
        out[col] = pd.Series(format_numbers(values), index=out.index, dtype=object)
    return out


def evidence_table(by_run: dict[str, dict]) -> pd.DataFrame:
    """A question's evidence for several runs: one row per quantity, named with its unit ("elapsed (s)"), one
    column per run; each row's numbers in one format; a run without the quantity shows "n/a"."""
    flat = {name: flatten(ev) for name, ev in by_run.items()}
    keys = list(dict.fromkeys(k for ev in flat.values() for k in ev))
    rows = {}
    for key in keys:
        values = [flat[name].get(key) for name in flat]
        if any(_is_number(v) for v in values) and all(_is_number(v) or _text(v) == NA for v in values):
            rows[_row_label(key)] = format_numbers(values)
        else:
            rows[_row_label(key)] = [_text(v) if not isinstance(v, bool) else str(v) for v in values]
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(flat), dtype=object)


def _row_label(key: str) -> str:
    head, sep, tail = key.rpartition(": ")  # "hosts 1: mean_Bps": the unit goes with the last part
    if not sep:
        return labelled(key)
    unit = _NESTED_UNITS.get((head.rsplit(" ", 1)[0], tail))
    return f"{head}{sep}{tail} ({unit})" if unit else f"{head}{sep}{labelled(tail)}"
