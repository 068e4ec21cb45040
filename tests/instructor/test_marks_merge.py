"""The marks merged into grades.csv where pandas is absent: the hub's `marking` service runs on the hub's own Python
(hub/requirements.txt has no pandas) and its page's merge button calls marks.merge there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
import marking_class as mc

from nmtkit.course.instructor import marks

ROOT = Path(__file__).resolve().parents[2]
# pandas made unimportable, as on the hub's Python
NO_PANDAS = ("import sys; sys.modules['pandas'] = None; from nmtkit.course.instructor import marks; "
             "marks.merge(sys.argv[1])")


def test_merge_runs_without_pandas_and_keeps_the_columns_and_figures(tmp_path):
    out = mc.make(tmp_path / "grades", mc.THREE)
    marks.fill(out)
    db = marks.connect(out)
    marks.write(db, "right", "05-q3-verdict", "g1", [0, 1], "right, from the held-out loss")
    marks.write(db, "right", "05-q5-check", "g1", [1])
    marks.write(db, "wrong", "05-q5-verdict", "g2", [2])
    before = (out / "grades.csv").read_text()
    for _ in range(2):  # twice: the derived columns replaced, not doubled
        got = subprocess.run([sys.executable, "-c", NO_PANDAS, str(out)], capture_output=True, text=True, cwd=ROOT)
        assert got.returncode == 0, got.stderr[-2000:]
    after = pd.read_csv(out / "grades.csv", index_col="student", keep_default_na=True)
    assert list(after.columns[:9]) == ["05-q11", "05-q11-written", "05-q11-total", "05-q3", "05-q3-written",
                                       "05-q3-total", "05-q5", "05-q5-written", "05-q5-total"], list(after.columns)
    assert list(after.columns[-3:]) == ["written_points", "to_grade", "total_points"]
    assert after.loc["right", "05-q3-written"] == 4 and after.loc["right", "05-q3-total"] == 6
    assert after.loc["right", "05-q5"] == 1 and after.loc["wrong", "05-q5-written"] == 1
    assert after.loc["right", "total_points"] == 2 + 4 + 1 and after.loc["wrong", "total_points"] == 2 + 1
    assert after["to_grade"].to_dict() == {"right": 2, "wrong": 3, "blank": 2}  # the two hand checks each
    assert pd.isna(after.loc["blank", "05-q3-written"]) and after.loc["right", "variant"] == "practice"
    unchanged = [c for c in pd.read_csv(pd.io.common.StringIO(before), index_col="student").columns
                 if c not in ("05-q5", "05-q11")]  # every check and tail column kept as it was
    assert after[unchanged].astype(str).equals(pd.read_csv(pd.io.common.StringIO(before), index_col="student")[
        unchanged].astype(str))
    assert "| 05-q3-verdict | 1 | 1 | 1 |" in (out / "class-report.md").read_text()
