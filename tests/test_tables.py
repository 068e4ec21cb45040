"""The analysis's tables for people (nmtkit.analysis.tables): no JSON blobs, one format per column (or per row of
an evidence table), units in the headers, seconds never shown as h:mm:ss under a seconds header."""
import re

import pandas as pd

from nmtkit.analysis import tables
from nmtkit.analysis.report import summary_table

DURATION = re.compile(r"^\d+:\d\d:\d\d$")


def _decimals(cells):
    """The decimals of each formatted number ("1,234.50" -> 2); None for text and n/a."""
    return [len(c.split(".")[1]) if re.fullmatch(r"-?[\d,]+(\.\d+)?", c) and "." in c else
            0 if re.fullmatch(r"-?[\d,]+", c) else None for c in cells]


def test_a_column_mixing_magnitudes_gets_one_format_and_seconds_stay_seconds():
    df = pd.DataFrame({"run": ["a", "b", "c"], "ranks": [1, 2, 4], "elapsed (s)": [30.2, 21.0, 381.4],
                       "tokens/s total": [20940.3, 23240.1, 3830.2], "bleu": [0.4806, 6.503, float("nan")],
                       "time": [1e9, 1e9 + 1.5, 1e9 + 3.0]})
    out = tables.readable(df)
    assert list(out.columns) == ["run", "ranks", "elapsed (s)", "tokens/s total", "bleu", "time since start (s)"]
    assert out["ranks"].tolist() == [1, 2, 4]  # integers stay numbers: code reads them
    for col in out.columns[2:]:
        cells = out[col].tolist()
        assert not any("e+" in c or "e-" in c for c in cells), (col, cells)  # no 2.119e+04 beside 3,830
        assert len({d for d in _decimals(cells) if d is not None}) == 1, (col, cells)
        assert not any(DURATION.match(c) for c in cells), (col, cells)
    assert out["elapsed (s)"].tolist() == ["30.20", "21.00", "381.40"]
    assert out["tokens/s total"].tolist() == ["20,940", "23,240", "3,830"]
    assert out["bleu"].tolist()[2] == "n/a" and out["time since start (s)"].tolist() == ["0.000", "1.500", "3.000"]


def test_evidence_flattens_records_into_rows_with_units_and_one_format_per_row():
    ev_a = {"ranks": 4, "iface": "nmt0", "link_gbps": 0.1918, "elapsed_s": 380.9, "params": 1395712,
            "hosts": [{"mean_Bps": 11447595.2, "host": "vm1", "samples": 359}, {"host": "vm2", "mean_Bps": 1.15e7}],
            "shape": {"cores": 2, "step_s": 0.757}, "tries_mbit_s": [191.7, 191.8]}
    ev_b = {"ranks": 1, "iface": "lo", "link_gbps": 1.0, "elapsed_s": 30.25, "params": None,
            "hosts": [{"host": "node0", "mean_Bps": 39394.35}]}
    df = tables.evidence_table({"reference": ev_a, "baseline": ev_b})
    cells = [str(c) for c in df.to_numpy().ravel()]
    assert not any(c.startswith(("{", "[")) or '": ' in c for c in cells), cells  # no JSON blob
    assert list(df.columns) == ["reference", "baseline"]
    assert {"link (Gbit/s)", "elapsed (s)", "hosts 1: host", "hosts 1: mean (B/s)", "hosts 2: mean (B/s)",
            "shape.step (s)", "tries (Mbit/s)"} <= set(df.index), list(df.index)
    assert list(df.index).index("hosts 1: host") < list(df.index).index("hosts 1: mean (B/s)")  # its name first
    assert df.loc["hosts 1: mean (B/s)"].tolist() == ["11,447,595", "39,394"]
    assert df.loc["hosts 2: mean (B/s)"].tolist() == ["11,500,000", "n/a"]
    assert df.loc["elapsed (s)"].tolist() == ["380.90", "30.25"]
    assert df.loc["link (Gbit/s)"].tolist() == ["0.1918", "1.0000"]
    assert df.loc["params"].tolist() == ["1,395,712", "n/a"] and df.loc["tries (Mbit/s)", "reference"] == \
        "191.7, 191.8"
    for label, row in df.iterrows():
        assert len({d for d in _decimals(row.tolist()) if d is not None}) <= 1, (label, row.tolist())


def test_tiny_values_share_one_scientific_form_and_labels_carry_units():
    assert tables.format_numbers([1.6e-05, 0.016]) == ["1.600e-05", "1.600e-02"]
    assert tables.format_numbers([2, 3.0, None]) == ["2", "3", "n/a"]
    assert tables.labelled("link_mean_mbit_s") == "link_mean (Mbit/s)" and tables.labelled("ranks") == "ranks"
    assert tables.labelled("steps_per_s") == "steps_per_s (steps/s)" and tables.labelled("total_mb") == "total (MB)"


def test_a_runs_summary_has_a_unit_column_and_no_durations():
    t = summary_table({"wall_time": 379.3187, "mfu": 0.0914, "peak_flops": 4.5528e10, "bleu_signature": "x",
                       "tokens_per_sec": 4301.79, "status": "finished", "reason": None})
    assert list(t.columns) == ["value", "unit"] and "bleu_signature" not in t.index
    assert t.loc["wall_time"].tolist() == ["379.3", "s"] and t.loc["mfu"].tolist() == ["9.140", "%"]
    assert t.loc["peak_flops"].tolist() == ["45.53", "GFLOP/s"] and t.loc["reason", "value"] == "n/a"
