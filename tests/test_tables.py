"""The analysis's tables for people (nmtkit.analysis.tables): no JSON blobs, one format per column (or per row of
an evidence table), units in the headers, seconds never shown as h:mm:ss under a seconds header. The numbers are
made up: none is a course figure."""
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
    df = pd.DataFrame({"run": ["a", "b", "c"], "ranks": [1, 2, 4], "elapsed (s)": [41.2, 27.0, 6012.8],
                       "tokens/s total": [52710.3, 61220.1, 2210.2], "bleu": [0.2606, 8.125, float("nan")],
                       "time": [1e9, 1e9 + 1.5, 1e9 + 3.0]})
    out = tables.readable(df)
    assert list(out.columns) == ["run", "ranks", "elapsed (s)", "tokens/s total", "bleu", "time since start (s)"]
    assert out["ranks"].tolist() == [1, 2, 4]  # integers stay numbers: code reads them
    for col in out.columns[2:]:
        cells = out[col].tolist()
        assert not any("e+" in c or "e-" in c for c in cells), (col, cells)  # no 2.119e+04 beside 3,830
        assert len({d for d in _decimals(cells) if d is not None}) == 1, (col, cells)
        assert not any(DURATION.match(c) for c in cells), (col, cells)
    assert out["elapsed (s)"].tolist() == ["41.20", "27.00", "6,012.80"]
    assert out["tokens/s total"].tolist() == ["52,710", "61,220", "2,210"]
    assert out["bleu"].tolist()[2] == "n/a" and out["time since start (s)"].tolist() == ["0.000", "1.500", "3.000"]


def test_evidence_flattens_records_into_rows_with_units_and_one_format_per_row():
    ev_a = {"ranks": 4, "iface": "eth1", "link_gbps": 0.4321, "elapsed_s": 512.6, "params": 2345678,
            "hosts": [{"mean_Bps": 23456789.2, "host": "n1", "samples": 123}, {"host": "n2", "mean_Bps": 2.35e7}],
            "shape": {"cores": 2, "step_s": 0.812}, "tries_mbit_s": [432.1, 433.2]}
    ev_b = {"ranks": 1, "iface": "lo", "link_gbps": 1.0, "elapsed_s": 60.25, "params": None,
            "hosts": [{"host": "m0", "mean_Bps": 51234.56}]}
    df = tables.evidence_table({"big": ev_a, "small": ev_b})
    cells = [str(c) for c in df.to_numpy().ravel()]
    assert not any(c.startswith(("{", "[")) or '": ' in c for c in cells), cells  # no JSON blob
    assert list(df.columns) == ["big", "small"]
    assert {"link (Gbit/s)", "elapsed (s)", "hosts 1: host", "hosts 1: mean (B/s)", "hosts 2: mean (B/s)",
            "shape.step (s)", "tries (Mbit/s)"} <= set(df.index), list(df.index)
    assert list(df.index).index("hosts 1: host") < list(df.index).index("hosts 1: mean (B/s)")  # its name first
    assert df.loc["hosts 1: mean (B/s)"].tolist() == ["23,456,789", "51,235"]
    assert df.loc["hosts 2: mean (B/s)"].tolist() == ["23,500,000", "n/a"]
    assert df.loc["elapsed (s)"].tolist() == ["512.60", "60.25"]
    assert df.loc["link (Gbit/s)"].tolist() == ["0.4321", "1.0000"]
    assert df.loc["params"].tolist() == ["2,345,678", "n/a"] and df.loc["tries (Mbit/s)", "big"] == "432.1, 433.2"
    for label, row in df.iterrows():
        assert len({d for d in _decimals(row.tolist()) if d is not None}) <= 1, (label, row.tolist())


def test_tiny_values_share_one_scientific_form_and_labels_carry_units():
    assert tables.format_numbers([2.7e-05, 0.027]) == ["2.700e-05", "2.700e-02"]
    assert tables.format_numbers([2, 3.0, None]) == ["2", "3", "n/a"]
    assert tables.labelled("link_mean_mbit_s") == "link_mean (Mbit/s)" and tables.labelled("ranks") == "ranks"
    assert tables.labelled("steps_per_s") == "steps_per_s (steps/s)" and tables.labelled("total_mb") == "total (MB)"


def test_a_runs_summary_has_a_unit_column_and_no_durations():
    t = summary_table({"wall_time": 512.3456, "mfu": 0.2317, "peak_flops": 3.1415e10, "bleu_signature": "x",
                       "tokens_per_sec": 1234.56, "status": "finished", "reason": None})
    assert list(t.columns) == ["value", "unit"] and "bleu_signature" not in t.index
    assert t.loc["wall_time"].tolist() == ["512.3", "s"] and t.loc["mfu"].tolist() == ["23.17", "%"]
    assert t.loc["peak_flops"].tolist() == ["31.42", "GFLOP/s"] and t.loc["reason", "value"] == "n/a"
