"""Notebook 03's link verdict: nk.link_table's frame (nmtkit.course.prose.link_figures) in words, every figure read
from the frame. The instructor's: it answers exercise 03-link, so the release leaves it out."""
from __future__ import annotations

import re

from nmtkit.errors import CourseError

SHARE = "exchange's share of a step"  # prose.SHARE, named again: prose imports this module, so it cannot import prose
LINK_COL = re.compile(r"exchange on ([\d.]+) Gbit/s \(ms\)")


def _link_col(table) -> tuple[str, float]:
    for col in table.columns:
        m = LINK_COL.fullmatch(col)
        if m:
            return col, float(m.group(1))
    raise CourseError("the table has no 'exchange on <rate> Gbit/s (ms)' column: build it with nk.link_table")


PACE = {"network": "the exchange would take longer than the compute at either end of its error: the network would "
                   "set the pace",
        "compute": "the exchange would take less than the compute at either end of its error: the compute would set "
                   "the pace",
        "cannot tell": "the rate lies inside the break-even band the compute's error spans: these trials cannot tell "
                       "whether the network or the compute would set the pace"}


def link_verdict(table) -> str:
    """link_table's result in words; every figure in the text is read from `table`."""
    col, gbps = _link_col(table)
    if table.attrs.get("pace") not in PACE:  # prose.pace's, set by link_table (this module cannot import prose)
        raise CourseError("the table has no pace in its attrs: build it with nk.link_table")
    rows = [f"{comp}: {r['bytes per rank (MB)']:.2f} MB per rank per step; of its {r['step time here (ms)']:.1f} ms "
            f"step, the compute is {r['compute (ms)']:.1f} ± {r['error (ms)']:.1f} ms; sending the bytes takes as "
            f"long as that on a {r['break-even link (Gbit/s)']:.3g} Gbit/s link ({r['break-even, low (Gbit/s)']:.3g}"
            f" to {r['break-even, high (Gbit/s)']:.3g} within the error); on {gbps:g} Gbit/s they take "
            f"{r[col]:.1f} ms, {r[SHARE]:.0%} of a step of compute + exchange" for comp, r in table.iterrows()]
    none = table.loc["none"]
    out = rows + [f"With no compression, on {gbps:g} Gbit/s {PACE[table.attrs['pace']]}.",
                  "This run cannot show it: its ranks share one machine, so no link was crossed; the rate above is "
                  "the reference run's, measured between its hosts."]
    if "fp16" in table.index:
        fp16 = table.loc["fp16"]
        saved = none[col] - fp16[col]
        dt = fp16["step time here (ms)"] - none["step time here (ms)"]
        word = "faster" if dt < 0 else "slower"
        why = ("more than the link time it can save, so the difference is not the link's doing (the load on the "
               "cores and the casts move the step time here)" if abs(dt) > saved else
               "no more than the link time it can save")
        out.append(f"fp16 halves the bytes, which would save {saved:.1f} ms of link time per step; its steps here "
                   f"were {abs(dt):.1f} ms {word}: {why}.")
    return "\n".join(out)


def with_verdict(table):
    """The frame with its verdict in .attrs["verdict"], worded from that very frame, never from memory."""
    table.attrs["verdict"] = link_verdict(table)
    return table
