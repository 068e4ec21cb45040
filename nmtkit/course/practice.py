"""Exercise checks for notebooks 01, 02, 03 and 06 (notebooks 04 and 05's are in exercises.py). The student computes a
decision from their own data; the check recomputes it from the same data (the data directory, the config, the
table the student's cells produced), prints ✓, or raises ExerciseError with a hint that names the idea, never code.
A grader re-running a check cell against the student's variables gets the same verdict.

    check_file_size(name, mb, mib, data_dir)               01: the largest text file of the data, in MB and MiB
    check_schedule(peak, last, kept, cfg)                  02: the homework's lr at its peak and at its last step,
                                                           and the share of its peak this profile keeps at its end
    check_link_share(trials, gbps, compute_ms=, error_ms=, break_even=, sets_pace=)
                                                           03: the compute without the exchange, two ways, and its
                                                           error; the break-even rates; what sets the pace
    check_sample_ceiling(lab, ceiling_mbit_s=, held_over_b=)
                                                           04: the most one link sample can read (8B/Delta) on the
                                                           fastest link, and what its busiest sample held, in B
    check_batching(speedup, batch_ms, lat)                 05: what batching buys per sentence, and what one call
                                                           with a full batch costs its caller
TensorFlow-free.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.course.prose import link_figures, pace
from nmtkit.course.targets import within
from nmtkit.errors import ExerciseError

TEXT_FILES = [f"{split}.{lang}" for split in ("train", "dev", "test") for lang in ("en", "de")]


def _require(ok: bool, message: str, hint: str) -> None:
    if not ok:
        raise ExerciseError(f"✗ {message}. Hint: {hint}")


def check_file_size(name: str, mb: float, mib: float, data_dir) -> None:
    """The largest of the six text files (train/dev/test x en/de) in `data_dir`, its size in MB and in MiB.

    Introduced in notebook 01_data_prep_bpe."""
    sizes = {f: (Path(data_dir) / f).stat().st_size for f in TEXT_FILES if (Path(data_dir) / f).exists()}
    _require(bool(sizes), f"no text files in {data_dir}", "run notebook 01's prepare cell first")
    biggest = max(sizes, key=sizes.get)
    _require(Path(str(name)).name == biggest, f"{name!r} is not the largest text file",
             "compare the byte sizes of all six text files of the data directory, the training files of both "
             "languages included")
    b = sizes[biggest]
    _require(within(mb, b / 1e6, 0.005, 0.01), f"{biggest} in MB: you have {mb}", "a megabyte (MB) is 10^6 bytes")
    _require(within(mib, b / 2**20, 0.005, 0.01), f"{biggest} in MiB: you have {mib}",
             "a mebibyte (MiB) is 2^20 bytes, about 5% more than a megabyte, so the same file is fewer MiB than MB")
    print(f"✓ {biggest}: {b:,} bytes = {b / 1e6:.2f} MB = {b / 2**20:.2f} MiB")


def check_schedule(peak: float, last: float, kept: float, cfg) -> None:
    """peak, last: the homework's (wmt16-base) lr at its warm-up's end and at its last step; kept: this profile's
    lr at its last step over its own peak.

    Introduced in notebook 02_single_gpu_baseline."""
    from nmtkit import config, lr
    hw = config.profile("wmt16-base")
    want_peak, want_last = lr.lr_for(hw, hw.train.warmup_steps), lr.lr_for(hw, hw.train.steps)
    idea = ("the homework's values (d_model, the factor lr_scale, its warm-up and its step count) are not this "
            "profile's; the schedule peaks where the warm-up ends")
    _require(within(peak, want_peak, 1e-3), f"the homework's peak: you have {peak}", idea)
    _require(within(last, want_last, 1e-3), f"the homework's lr at step {hw.train.steps:,}: you have {last}", idea)
    want_kept = lr.lr_for(cfg, cfg.train.steps) / lr.lr_for(cfg, cfg.train.warmup_steps)
    _require(within(kept, want_kept, 1e-3), f"the share {cfg.profile} keeps: you have {kept}",
             "this profile's lr at its last step divided by its lr at the end of its warm-up")
    # no value printed: the check confirms the student's figures, never hands them over
    print(f"✓ the homework's rates at steps {hw.train.warmup_steps:,} and {hw.train.steps:,}, and the share "
          f"{cfg.profile} keeps, agree with the schedule")


def check_link_share(trials, gbps: float, *, compute_ms: float, error_ms: float, break_even, sets_pace: str) -> None:
    """compute_ms, error_ms: the compute of a step without compression, the mean of two estimates (the step less its
    exchange timed alone; the step less the exchange fp16's saving implies), and half their gap; break_even: per
    compression, the link rate (Gbit/s) at which sending the bytes each rank sent per step takes as long as that
    compute; sets_pace: on a `gbps` link with no compression, "network", "compute" or "cannot tell" (the link's rate
    within the break-even rates of the compute's two ends).

    Introduced in notebook 03_horovod_multinode."""
    figures = link_figures(trials, gbps)
    none = figures.loc["none"]
    _require(within(compute_ms, none["compute (ms)"], 0.02, 0.1), f"compute_ms = {compute_ms}",
             "two estimates of the compute: the step less its exchange timed alone, and the step less the exchange "
             "that fp16's saving implies (fp16 halves the bytes, so it saves half the exchange); take their mean")
    _require(within(error_ms, none["error (ms)"], 0.02, 0.1), f"error_ms = {error_ms}",
             "the method's error: half the gap between the two estimates of the compute")
    got = dict(break_even.items()) if hasattr(break_even, "items") else {}
    for comp, ref in figures["break-even link (Gbit/s)"].items():
        _require(comp in got and within(got[comp], ref, 0.02, 1e-4), f"the break-even rate for {comp}: you have "
                 f"{got.get(comp)}", "the bytes one rank sends per step (loopback counts every rank's), in bits, over "
                 "the compute in seconds, in Gbit/s")
    _require(sets_pace == pace(figures, gbps), f"sets_pace = {sets_pace!r}",
             "the network sets the pace when the exchange takes at least as long as the compute; with the compute "
             "known only to within its error, a link whose rate lies between the break-even rates of the compute's "
             "two ends cannot tell the two apart")
    print(f"✓ the compute, its error, the break-even rates and your decision for a {gbps:g} Gbit/s link agree with "
          "the measurements")


def check_sample_ceiling(lab, *, ceiling_mbit_s: float, held_over_b: float) -> None:
    """On the lab's fastest link (lab: nk.lab_runs()): ceiling_mbit_s, the most one monitor sample of the nominal
    interval Delta can read when a step's exchange is one burst of the ring's B bytes (8B/Delta, in Mbit/s); and
    held_over_b, the bytes its busiest sample holds (its rate times its own length, the gap since that host's sample
    before it) over B.

    Introduced in notebook 04_bottleneck_lab."""
    from nmtkit.analysis.lab import link_samples
    fastest = lab.link_mbit_s.idxmax()
    row = lab.loc[fastest]
    b = 2 * (row.ranks - 1) / row.ranks * row.params * row.bytes_per_value
    where = dict(zip(lab.index, lab.attrs.get("paths") or ()))  # the runs the table was read from, as the grader's
    s = link_samples(Path(where[fastest]) if fastest in where else fastest)
    length = s.groupby("host").t_s.diff()
    top = s.mbit_s.idxmax()
    _require(within(ceiling_mbit_s, b * 8 / s.attrs["interval_s"] / 1e6, 0.01), f"ceiling_mbit_s = {ceiling_mbit_s}",
             f"the ring's B of {fastest} (bytes), in bits, over the sampling interval Delta in seconds, in Mbit/s")
    _require(within(held_over_b, s.mbit_s[top] * 1e6 / 8 * length[top] / b, 0.01), f"held_over_b = {held_over_b}",
             "a sample's bytes are its rate times its own length (the time since the same host's sample before it); "
             "take the busiest sample's, over B")
    print(f"✓ the ceiling 8B/Delta and the busiest sample's bytes on {fastest} agree with its samples")


def check_batching(speedup: float, batch_ms: float, lat) -> None:
    """lat: nk.latency's rows at batch 1 and at a larger batch; speedup: ms per sentence at batch 1 over ms per
    sentence at the larger batch; batch_ms: how long one call with a full larger batch takes.

    Introduced in notebook 06_inference_export."""
    import pandas as pd
    lat = pd.DataFrame(lat).set_index("batch_size")
    _require(1 in lat.index and len(lat) >= 2, "the latency table needs batch 1 and a larger batch",
             "measure both with the kit's latency function")
    big = lat.index.max()
    want_speedup = lat.loc[1, "ms_per_sentence"] / lat.loc[big, "ms_per_sentence"]
    want_ms = lat.loc[big, "ms_per_sentence"] * big
    _require(within(speedup, want_speedup, 0.01), f"speedup: you have {speedup}",
             f"compare the time per sentence, not the time per call, at batch 1 and at batch {big}")
    _require(within(batch_ms, want_ms, 0.01), f"one call at batch {big}: you have {batch_ms} ms",
             "a call returns when its whole batch is translated: the time per sentence times the batch size")
    print(f"✓ batch {big} translates {want_speedup:.1f}x as many sentences per second as batch 1; one call with "
          f"{big} sentences takes {want_ms:.0f} ms against {lat.loc[1, 'ms_per_sentence']:.0f} ms for one alone")
