"""Notebooks 01, 02, 03 and 05's exercise checks (nmtkit.course.practice) and the prose the kit words from a
table (nmtkit.course.prose): right answers pass, each kind of wrong answer fails with a hint and no code, and
every figure in a generated sentence is the table's."""
import re

import pandas as pd
import pytest

import nmtkit as nk
from nmtkit import config, lr
from nmtkit.course import practice, prose
from nmtkit.errors import NmtkitError, CourseError, ExerciseError


def trials(step_none=160.3, step_fp16=351.0, params=1_054_208, ranks=2):
    """compression_trials' columns, with notebook 03's committed figures by default."""
    rows = []
    for comp, width, on_lo in (("none", 4, 8_476_940), ("fp16", 2, 4_306_256)):
        per_rank = 2 * (ranks - 1) / ranks * width * params
        rows.append({"compression": comp, "ranks": ranks, "params": params, "steps measured": "3..6",
                     "bytes/step on lo": on_lo, "ring model": round(per_rank * ranks), "measured / model": 1.0,
                     "bytes/step per rank (model)": round(per_rank),
                     "step time (ms)": step_none if comp == "none" else step_fp16, "same weights": True})
    return pd.DataFrame(rows).set_index("compression")


def no_code(message: str) -> bool:
    return not re.search(r"=|\[|\]|\*\*|\bnk\.|\.loc\b|lambda|\w\(", message.split("Hint:")[1])  # no call, index or assignment


# --- notebook 01 --------------------------------------------------------------------------------------------

def test_file_size(tmp_path, capsys):
    for i, f in enumerate(practice.TEXT_FILES):
        (tmp_path / f).write_bytes(b"x" * (2_000_000 + 100_000 * i))  # MB and MiB differ by 0.1 here
    (tmp_path / "train.en.ids.npy").write_bytes(b"x" * 10**6)  # not a text file: never the answer
    b = 2_500_000
    practice.check_file_size("test.de", round(b / 1e6, 2), round(b / 2**20, 2), tmp_path)
    assert "✓ test.de: 2,500,000 bytes = 2.50 MB = 2.38 MiB" in capsys.readouterr().out
    for args, what in ((("train.de", 2.2, 2.1), "not the largest"), (("test.de", b / 2**20, b / 2**20), "in MB"),
                       (("test.de", b / 1e6, b / 1e6), "in MiB")):
        with pytest.raises(ExerciseError, match=what) as e:
            practice.check_file_size(*args, tmp_path)
        assert no_code(str(e.value)), str(e.value)
    with pytest.raises(ExerciseError, match="no text files"):
        practice.check_file_size("train.de", 1, 1, tmp_path / "none")


# --- notebook 02 --------------------------------------------------------------------------------------------

def test_schedule(capsys):
    cfg, hw = config.profile("tiny"), config.profile("wmt16-base")
    peak, last = lr.lr_for(hw, 8000), lr.lr_for(hw, 300_000)
    kept = lr.lr_for(cfg, cfg.train.steps) / lr.lr_for(cfg, cfg.train.warmup_steps)
    practice.check_schedule(peak, last, kept, cfg)
    out = capsys.readouterr().out
    assert "peak 9.882e-04 at step 8,000" in out and "(16% of the peak)" in out and "tiny ends at 58%" in out
    tiny_peak = lr.lr_for(cfg, cfg.train.warmup_steps)  # the profile's own values: the mistake the hint names
    for args, what in (((tiny_peak, last, kept), "peak"), ((peak, peak, kept), "300,000"),
                       ((peak, last, 1 / kept), "share tiny keeps"), ((peak, last, None), "share")):
        with pytest.raises(ExerciseError, match=what) as e:
            practice.check_schedule(*args, cfg)
        assert no_code(str(e.value)), str(e.value)


# --- notebook 03 --------------------------------------------------------------------------------------------

def test_link_share_and_decision(capsys):
    t = trials()
    share = t["bytes/step per rank (model)"] * 8 / 1e9 * 1000 / t["step time (ms)"]
    practice.check_link_share(share, False, t, 1.0)
    assert "none 21%, fp16 5% on 1 Gbit/s: the compute sets the pace" in capsys.readouterr().out
    practice.check_link_share(share.to_dict(), False, t, 1.0)  # a dict will do
    for args, what in (((share, True), "network_bound"), ((share * 8, False), "share for none"),
                       (({"none": share["none"]}, False), "share for fp16")):
        with pytest.raises(ExerciseError, match=what) as e:
            practice.check_link_share(*args, t, 1.0)
        assert no_code(str(e.value)), str(e.value)
    slow = trials(step_none=20.0, step_fp16=15.0)  # the same bytes on a quicker machine: the link dominates
    share = slow["bytes/step per rank (model)"] * 8 / 1e9 * 1000 / slow["step time (ms)"]
    practice.check_link_share(share, True, slow, 1.0)


def test_link_verdict_states_the_tables_figures_and_no_fixed_claim():
    for step_none, step_fp16 in ((160.3, 351.0), (900.0, 880.0), (20.0, 15.0)):
        table = prose.link_table(trials(step_none, step_fp16), 1.0)
        text = table.attrs["verdict"]
        assert text == prose.link_verdict(table)
        for comp, r in table.iterrows():  # every share and step time the table shows is the text's
            assert f"{comp}: the allreduce would take {r['allreduce on 1 Gbit/s (ms)']:.1f} ms" in text
            assert f"{r['share of the step']:.0%} of the {r['step time here (ms)']:.1f} ms step" in text
        share = table.loc["none", "share of the step"]
        assert ("the network sets the pace" in text) == (share >= prose.BOUND_SHARE)
        assert ("slower" in text) == (step_fp16 > step_none)
        assert "few percent" not in text and "noise" not in text
    text = prose.link_table(trials(160.3, 351.0), 1.0).attrs["verdict"]
    assert "21% of the 160.3 ms step" in text and "190.7 ms slower" in text and "not the link's doing" in text
    with pytest.raises(CourseError, match="step time"):
        prose.link_table(trials().drop(columns="step time (ms)"), 1.0)
    with pytest.raises(NmtkitError, match="link_table"):
        prose.link_verdict(pd.DataFrame({"x": [1]}))


def test_ring_derived_from_the_measured_bytes():
    d = prose.ring_derivation(trials())
    assert d["transfers"] == 2 and d["bytes_per_rank"] == 8_476_940 / 2
    assert d["gradient_model"] == 4 * 1_054_208
    assert d["gradient_measured"] / d["gradient_model"] == pytest.approx(1.005, abs=0.001)
    assert prose.ring_derivation(trials(), "fp16")["gradient_model"] == 2 * 1_054_208
    assert prose.ring_derivation(trials(ranks=4))["transfers"] == 6
    with pytest.raises(CourseError, match="2 ranks"):
        prose.ring_derivation(trials(ranks=1))
    import matplotlib
    matplotlib.use("Agg")
    fig = nk.draw_ring(trials())
    labels = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "rank 0" in labels and "rank 1" in labels and "4.24 MB/step = 2 x 2.12 MB" in labels


def test_homework_exchange_and_wmt_facts():
    text = prose.homework_exchange(60_880_896, 4, 1.0)
    assert "= 365.3 MB per rank per step, 2.92 s on 1 Gbit/s" in text and "182.6 MB" in text and "1.46 s" in text
    from nmtkit.data import wmt
    facts = prose.wmt16_facts()
    assert f"{wmt.DOWNLOAD_GB} GB of downloads" in facts and f"{wmt.DISK_NEED_GB} GB of free disk" in facts
    assert "32,768 pieces" in facts and "5 archives (3 of training text)" in facts


# --- notebook 05 --------------------------------------------------------------------------------------------

def test_batching(capsys):
    lat = [{"sentences": 32, "batch_size": 1, "seconds": 1.6, "ms_per_sentence": 50.0},
           {"sentences": 256, "batch_size": 32, "seconds": 2.56, "ms_per_sentence": 10.0}]
    practice.check_batching(5.0, 320.0, pd.DataFrame(lat))
    out = capsys.readouterr().out
    assert "batch 32 translates 5.0x" in out and "320 ms against 50 ms" in out
    for args, what in (((0.2, 320.0), "speedup"), ((5.0, 10.0), "one call at batch 32"), (("five", 320.0), "speedup")):
        with pytest.raises(ExerciseError, match=what) as e:
            practice.check_batching(*args, lat)
        assert no_code(str(e.value)), str(e.value)
    with pytest.raises(ExerciseError, match="batch 1"):
        practice.check_batching(5.0, 320.0, lat[1:])


def test_front_door_names():
    for name in ("check_file_size", "check_schedule", "check_link_share", "check_batching", "wmt16_facts",
                 "link_table", "homework_exchange", "draw_ring"):
        assert getattr(nk, name).__module__.startswith("nmtkit.course.")
