"""The figures that decide each homework question, computed from a run's logs the way the exercises of notebook 05
ask the student to compute them: `q5(run, o)` is {variable name: value}; `lab(paths)` the lab's parts. Each
question's record (nmtkit.course.instructor.book) names its decider; book.decide(run) runs them all.

These are what `nmtkit.course.exercises.check` grades against and what the instructor's verdicts quote; the
student never needs this module (its figures are the answers). TensorFlow-free; a question whose inputs the logs
lack is left out (with the reason under "missing").
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from nmtkit.analysis.ablation import DEFAULT, EARLY_STEP, twin
from nmtkit.analysis.evidence import Options, bytes_per_param, node_price, steady_steps
from nmtkit.analysis.logs import Run, checkpoint_info, load_run
from nmtkit.config import profile
from nmtkit.course.instructor.judgments import bleu_rule, loss_rule
from nmtkit.course.instructor.mfu import record_flops
from nmtkit.errors import AnalysisError
from nmtkit.ring import ring_bytes

HOMEWORK = "wmt16-base"  # the homework's configuration: transformer-base, 300,000 steps, warm-up 8,000
MB, MIB = 1e6, 2 ** 20


def step_seconds(run: Run, o: Options) -> float:
    st = steady_steps(run, o.skip_steps)
    if st.empty:
        raise AnalysisError("per-step times (ranks/rank<R>.jsonl)")
    return float(st["step_time"].mean())


def q1(run: Run, o: Options) -> dict:
    step_s, target = step_seconds(run, o), o.max_steps or profile(HOMEWORK).train.steps
    out = {"step_s": step_s, "target_steps": target, "hours_to_target": target * step_s / 3600}
    price = node_price(run, o)[0]  # the report's price too: the caller's or run.json's, none for one machine
    if price:
        nodes = max(len(run.hosts), 1)
        out.update(nodes=nodes, price=price, cost=out["hours_to_target"] * nodes * price)
    return out


def q2(run: Run, o: Options) -> dict:
    """The last evaluation against the one k = o.plateau_k evaluations earlier, in BLEU and in eval loss
    (judgments.bleu_rule and loss_rule: the one rule the verdict's words read too)."""
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    if len(bleu) <= o.plateau_k or len(loss) <= o.plateau_k:
        raise AnalysisError(f"dev BLEU and eval loss at {o.plateau_k + 1} or more evaluations")
    b = bleu_rule(run, bleu, o.plateau_k, o)  # by the paired bootstrap: plateaued, rising, falling or cannot tell
    flat_l, drop = loss_rule(loss, o.plateau_k, o)
    return {"steps": b["bleu_steps"], "k": o.plateau_k, "bleu_gain": b["bleu_gain"], "loss_drop": drop,
            "trained": bool(b["bleu_verdict"] == "plateaued" and flat_l)}


def q3(run: Run, o: Options) -> dict:
    ev, tr = run.series("eval_loss"), run.series("train_loss")
    if len(ev) < 2 or tr.empty:
        raise AnalysisError("eval loss at two or more evaluations and the train loss")
    i = int(ev["value"].idxmin())
    best, step_best = float(ev["value"].iloc[i]), int(ev["step"].iloc[i])
    # the last logged at or before s
    def train_at(s):
        return float(tr[tr["step"] <= s]["value"].iloc[-1])
    loss_up = float(ev["value"].iloc[-1]) - best
    train_falling = train_at(int(ev["step"].iloc[-1])) < train_at(step_best) or i == len(ev) - 1
    return {"loss_up": loss_up, "best_step": step_best,
            "overfitting": bool(loss_up > o.plateau_tol * best and train_falling)}


def q4(run: Run, o: Options) -> dict:
    """The derivation the exercise asks for: model FLOPs per step from the shape (each side's weights with its own
    tokens, nmtkit.course.instructor.mfu), tokens per second, and their MFU against the peak the run measured."""
    st, summary = steady_steps(run, o.skip_steps), run.status.get("summary") or {}
    peak = summary.get("peak_flops")
    vocab = summary.get("vocab_size") or (run.config.data.vocab_size if run.config else None)
    if st.empty or "src_tokens" not in st or not peak or not vocab or run.config is None:
        raise AnalysisError("per-step source and target tokens, the model's shape and the measured peak FLOP/s "
                            "(ranks/rank<R>.jsonl, config.json, run.json)")
    flops = float(np.mean([record_flops(r, run.config.model, vocab) for r in st.to_dict("records")]))
    step_s = float(st["step_time"].mean())
    if flops / step_s > float(peak):  # a peak timed while load held the cores (the kit now re-times such peaks)
        raise AnalysisError(f"a peak at least what ran: run.json's peak_flops {float(peak) / 1e9:.1f} GFLOP/s is below "
                            f"the {flops / step_s / 1e9:.1f} GFLOP/s the steps achieved (timed under load)")
    return {"flops_per_step": flops, "tokens_per_s": float(st["tokens"].mean()) / step_s,
            "mfu": flops / step_s / float(peak)}


def exchange(run: Run, o: Options) -> dict:
    """Questions 5 and 11's one bound and one ratio (judgments.exchange, inside judgments.network)."""
    from nmtkit.course.instructor.judgments import network
    net = network(run, o)
    if not net.get("counted_bytes_per_step"):
        raise AnalysisError("network counters of a run with two or more nodes, two step ends inside their samples")
    return net


def q5(run: Run, o: Options) -> dict:
    n, params = run.n_ranks, run.status.get("params")
    if n < 2 or not params:
        raise AnalysisError("two or more ranks and the parameter count (run.json)")
    bound = ring_bytes(params, n, bytes_per_param(run))
    return {"bytes_per_param": bytes_per_param(run), "bound_mb": bound / MB,
            "measured_over_bound": exchange(run, o)["measured_over_bound"],
            "link_s_1g": bound * 8 / 1e9, "link_s_10g": bound * 8 / 1e10}


def warmup_figures(run: Run) -> dict:
    """What one run's logs say about its warm-up: the logged step where its learning rate peaks, its train loss as
    logged at EARLY_STEP (where the longer warm-up ends) and its last evaluation's eval loss."""
    rate, train, ev = run.series("learning_rate"), run.series("train_loss"), run.series("eval_loss")
    early = train[train["step"] <= EARLY_STEP]
    if rate.empty or early.empty or ev.empty:
        raise AnalysisError(f"the logged learning rate, the train loss up to step {EARLY_STEP} and an eval loss "
                            "(scalars.jsonl)")
    return {"peak_step": int(rate["step"].iloc[int(rate["value"].to_numpy().argmax())]),
            "loss_at_100": float(early["value"].iloc[-1]), "final_eval_loss": float(ev["value"].iloc[-1]),
            "early_step": int(early["step"].iloc[-1]), "final_step": int(ev["step"].iloc[-1])}


def q6(run: Run, o: Options) -> dict:
    """Decided on the warm-up ablation's short run (nmtkit.analysis.ablation) against its twin beside it, the run
    with the default warm-up: the short run's peak step, and the two gaps (short minus default) in the train loss at
    EARLY_STEP and in the last eval loss. (The homework's rates at 8,000 and 300,000 steps are notebook 02's
    exercise, not this question's.)"""
    other = twin(run.path)
    if other is None:
        raise AnalysisError(f"the warm-up ablation's short run and its twin {DEFAULT} (nk.warmup_runs())")
    short, default = warmup_figures(run), warmup_figures(load_run(other))
    return {**short, "loss_gap_100": short["loss_at_100"] - default["loss_at_100"],
            "final_gap": short["final_eval_loss"] - default["final_eval_loss"],
            "runs": {run.name: short, DEFAULT: default}, "short": run.name}


def q7(run: Run, o: Options) -> dict:
    files = (run.data_stats.files if run.data_stats else None) or {}
    if not all(f in files for f in ("train.en", "train.de")):
        raise AnalysisError("the byte counts of train.en and train.de (data_stats.json)")
    total = sum(files[f]["bytes"] for f in ("train.en", "train.de"))
    # a sentence pair is one line in each file: the pairs are one side's lines, not both sides' added
    return {"train_mb": total / MB, "train_mib": total / MIB, "train_lines": files["train.en"]["lines"]}


def q8(run: Run, o: Options) -> dict:
    info = checkpoint_info(run.path, with_variables=False)
    if info.prefix is None:
        raise AnalysisError(info.problem)
    return {"files": sorted(Path(f).name for f, _ in info.files)}


def q9(run: Run, o: Options) -> dict:
    params = run.status.get("params")
    if not params:
        raise AnalysisError("the parameter count (run.json)")
    return {"predicted_mb": params * 4 * 3 / MB}  # float32 weights + Adam's two slots (m, v) of the same shape


def q10(run: Run, o: Options) -> dict:
    st = steady_steps(run, o.skip_steps)
    if st.empty or "tokens" not in st:
        raise AnalysisError("per-step times and tokens (ranks/rank<R>.jsonl)")
    return {"mean_ms": float(st["step_time"].mean() * 1000),
            "tokens_per_step": float(st.groupby("step")["tokens"].sum().mean())}


def q11(run: Run, o: Options) -> dict:
    """The bytes counted per step (question 5's) and the time they need on the link preflight measured, over the
    mean step; decided from measurements only (no share on an assumed link)."""
    if run.n_ranks < 2:
        raise AnalysisError("two or more ranks")
    net = exchange(run, o)
    if not net["link_measured"]:
        raise AnalysisError(f"a link measured by preflight (run.json's link_measured_mbit_s); {net['link_source']}")
    per_step = net["counted_bytes_per_step"]
    return {"bytes_per_step_mb": per_step / MB, "link_share": per_step / net["link_Bps"] / step_seconds(run, o)}


# --- the bottleneck lab (notebook 04): decided on a set of runs, not one --------------------------------------

LAB_PARTS = ("lab_predict", "lab_fit", "lab_fp16", "lab_bursts", "lab_scaling")  # what lab() decides beside lab_nic
NEAR = 0.8  # a link sample "at the link's rate": within 20% of the rate preflight measured


def lab_table(paths, o: Options):
    """The lab's table with the ring's bytes, their link time and the bytes counted; and the compute-only run: the
    run of the largest shape whose link costs least, or with one such run a one-rank run (None: neither)."""
    from nmtkit.analysis.lab import lab_runs
    t = lab_runs(paths, o)
    where = dict(zip(t.index, t.attrs["paths"]))  # run name -> its directory
    t = t.assign(ring_bytes=ring_bytes(t["params"], t["ranks"], t["bytes_per_value"]))
    t = t.assign(link_s=t["ring_bytes"] * 8 / (t["link_mbit_s"] * 1e6), counted_bytes=t["bytes_per_step"])
    t.attrs["where"] = where
    series = t[(t["ranks"] == t["ranks"].max()) & t["link_s"].notna()]
    ones = t[t["ranks"] == 1]
    compute = series.loc[series["link_s"].idxmin()] if len(series) > 1 else \
        ones.loc[ones["step_s"].idxmin()] if len(ones) and len(series) else None
    return t, series, compute


def lab(paths, o: Options | None = None) -> dict:
    """The lab's figures on the runs at `paths` (nmtkit.analysis.lab's table): lab_predict, lab_fit, lab_fp16,
    lab_bursts, lab_scaling, lab_nic; each left out (under "missing") where these runs cannot decide it."""
    o = o or Options()
    t, series, compute = lab_table(paths, o)
    out, missing = {"table": t}, {}
    _lab_nic(t, o, out, missing)  # one run across hosts is enough: no compute-only run needed
    if compute is None:
        missing.update({q: "no run with a measured link and a compute-only run" for q in LAB_PARTS
                        if q not in out and q not in missing})
        return {**out, "missing": missing}
    shaped = series.drop(index=compute.name, errors="ignore")
    # the compute: the baseline's step less its own exchange where the run timed that alone (it is not free)
    timed = compute["exchange_s"] == compute["exchange_s"]
    comp = float(compute["step_s"]) - (float(compute["exchange_s"]) if timed else 0.0)
    t["predicted_s"] = comp + t["link_s"]
    plain = shaped[shaped["compression"] == "none"]
    slowest = plain.loc[plain["link_mbit_s"].idxmin()] if len(plain) else None
    if slowest is not None:
        out["lab_predict"] = {"compute_s": comp, "predicted_s": float(t.loc[slowest.name, "predicted_s"]),
                              # the baseline's own exchange, timed alone: not free, and not at the link's rate
                              "baseline": str(compute.name), "baseline_step_s": float(compute["step_s"]),
                              "baseline_exchange_s": float(compute["exchange_s"]),
                              "baseline_achieved_mbit_s": float(compute["ring_bytes"] * 8e-6 / compute["exchange_s"]),
                              "baseline_link_mbit_s": float(compute["link_mbit_s"])}
    else:
        missing["lab_predict"] = "no run over a shaped link without compression"
    if len(shaped) >= 2 and slowest is not None:
        k, c = np.polyfit(shaped["link_s"].to_numpy(float), shaped["step_s"].to_numpy(float), 1)
        out["lab_fit"] = {"k": float(k), "intercept_s": float(c),
                          "eff_mbit_s": float(slowest["ring_bytes"] * 8 / (slowest["step_s"] - comp) / 1e6)}
    else:
        missing["lab_fit"] = "a fit needs two or more runs beside the compute-only one"
    fp16 = shaped[shaped["compression"] == "fp16"]
    pairs = [(n, f) for n in plain.sort_values("link_mbit_s").index for f in fp16.index
             if abs(fp16.loc[f, "link_mbit_s"] / plain.loc[n, "link_mbit_s"] - 1) <= 0.25]
    if pairs:
        n, f = pairs[0]  # the slowest link with runs both with and without fp16
        out["lab_fp16"] = {"bytes_ratio": float(t.loc[f, "counted_bytes"] / t.loc[n, "counted_bytes"]),
                           "fp16_mb": float(t.loc[f, "counted_bytes"] / 1e6),
                           "step_ratio": float(t.loc[f, "step_s"] / t.loc[n, "step_s"])}
    else:
        missing["lab_fp16"] = "no pair of runs at one link rate with and without fp16"
    _lab_bursts_and_scaling(t, series, plain, o, out, missing)
    return {**out, "missing": missing}


def _lab_bursts_and_scaling(t, series, plain, o: Options, out: dict, missing: dict) -> None:
    from nmtkit.analysis.lab import link_samples
    at200 = plain[(plain["link_mbit_s"] - 200).abs() <= 50]
    if len(at200):
        s = link_samples(Path(t.attrs["where"][at200.index[0]]), o)
        near = (s["mbit_s"] >= NEAR * at200["link_mbit_s"].iloc[0]).to_numpy()
        out["lab_bursts"] = {"share_near_rate": float(near.mean()),
                             "mean_over_rate": float(s["mbit_s"].mean() / at200["link_mbit_s"].iloc[0]),
                             "mb_per_step": float(s["mbit_s"].mean() * s.attrs["step_s"] / 8)}
    else:
        missing["lab_bursts"] = "no run at about 200 Mbit/s without compression"
    one = t[t["ranks"] == 1]
    two = t[(t["ranks"] == 2) & (t["hosts"] == 2)]
    four = series[series["link_mbit_s"].between(750, 1250)]
    if len(one) and len(two) and len(four):
        base, cores = float(one["tokens_per_s"].iloc[0]), pd.to_numeric(t["cores"], errors="coerce")
        cores = cores / cores[one.index[0]]  # NaN where a run's cores are not known
        out["lab_scaling"] = {"base_tokens_per_s": base, "speedup_2": float(two["tokens_per_s"].iloc[0]) / base,
                              "speedup_4": float(four["tokens_per_s"].iloc[0]) / base,
                              # the ideal the hardware allows: the cores the ranks could use, over one rank's
                              "ideal_2": float(cores[two.index[0]]), "ideal_4": float(cores[four.index[0]]),
                              # a 2-rank step less its exchange timed alone, over one rank's step: the compute's
                              # own slowdown with every core busy (NaN where the exchange was not timed)
                              "compute_2_over_1": float((two["step_s"].iloc[0] - two["exchange_s"].iloc[0])
                                                        / one["step_s"].iloc[0]),
                              # what else could set the last point: the link's share of its step, and the cores
                              "link_share_4": float(four["link_s"].iloc[0] / four["step_s"].iloc[0]),
                              "oversubscribed_4": bool(four["oversubscribed"].iloc[0])}
    else:
        missing["lab_scaling"] = "runs of 1 rank, 2 hosts x 1 rank and 2 hosts x 2 ranks at about 1 Gbit/s"


def _lab_nic(t, o: Options, out: dict, missing: dict) -> None:
    """Which interface carried the gradients between hosts, on the table's slowest multi-host run without
    compression: the data link the kit finds (machines.link_iface: cluster.iface, else the busiest apart from
    loopback), and its bytes per step (the busier direction, counted between step ends: the one estimator, question
    5's) over the flat ring's bound. Loopback carries as much (the ring's edge between a host's own ranks) but never
    leaves the host; a control network carries next to nothing."""
    from nmtkit.analysis.lab import link_samples
    across = t[(t["hosts"] > 1) & (t["compression"] == "none") & t["link_mbit_s"].notna()]
    if across.empty:
        missing["lab_nic"] = "no run across hosts without compression, with a measured link"
        return
    name = across["link_mbit_s"].idxmin()
    try:
        s = link_samples(Path(t.attrs["where"][name]), o)
    except AnalysisError as e:
        missing["lab_nic"] = str(e)
        return
    per_step = float(s.attrs["bytes_per_step"])
    out["lab_nic"] = {"iface": s.attrs["iface"], "over_bound": per_step / float(t.loc[name, "ring_bytes"]),
                      "run": str(name)}
