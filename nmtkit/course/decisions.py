"""The figures that decide each homework question, computed from a run's logs the way the exercises of notebook 04
ask the student to compute them: `decide(run)[q]` is {variable name: value} for q in "q1".."q11".

These are what `nmtkit.course.exercises.check` grades against and what the instructor's verdicts quote; the
student never needs this module (its figures are the answers). TensorFlow-free; a question whose inputs the logs
lack is left out (with the reason under "missing").
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nmtkit import lr
from nmtkit.analysis.evidence import Options, bleu_tolerance, bytes_per_param, steady_steps
from nmtkit.analysis.logs import Run, checkpoint_info
from nmtkit.config import profile
from nmtkit.course.judgments import plateau_rule
from nmtkit.model.flops import record_flops
from nmtkit.errors import AnalysisError

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
    if o.price_per_node_hour is not None:  # a price only for hardware the caller names: local processes are no VMs
        nodes = max(len(run.hosts), 1)
        out.update(nodes=nodes, cost=out["hours_to_target"] * nodes * o.price_per_node_hour)
    return out


def q2(run: Run, o: Options) -> dict:
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    every = run.config.eval.every if run.config and run.config.eval.every else None
    if every is None or len(bleu) < 2 or len(loss) < 2:
        raise AnalysisError("dev BLEU and eval loss at two or more evaluations, and eval.every in config.json")
    window = o.plateau_k * every
    last = int(loss["step"].max())
    k_b, k_l = int((bleu["step"] > last - window).sum()), int((loss["step"] > last - window).sum())
    if k_b >= len(bleu) or k_l >= len(loss):
        raise AnalysisError(f"evaluations before the last {window} steps")
    flat_b, gain = plateau_rule(bleu["value"].tolist(), k_b, o.plateau_tol, True, bleu_tolerance(run, o)[0])
    flat_l, drop = plateau_rule(loss["value"].tolist(), k_l, o.plateau_tol, False)
    return {"window_steps": window, "bleu_gain": gain, "loss_drop": drop, "trained": bool(flat_b and flat_l)}


def q3(run: Run, o: Options) -> dict:
    ev, tr = run.series("eval_loss"), run.series("train_loss")
    if len(ev) < 2 or tr.empty:
        raise AnalysisError("eval loss at two or more evaluations and the train loss")
    i = int(ev["value"].idxmin())
    best, step_best = float(ev["value"].iloc[i]), int(ev["step"].iloc[i])
    train_at = lambda s: float(tr[tr["step"] <= s]["value"].iloc[-1])  # noqa: E731  the last logged at or before s
    loss_up = float(ev["value"].iloc[-1]) - best
    train_falling = train_at(int(ev["step"].iloc[-1])) < train_at(step_best) or i == len(ev) - 1
    return {"loss_up": loss_up, "best_step": step_best,
            "overfitting": bool(loss_up > o.plateau_tol * best and train_falling)}


def q4(run: Run, o: Options) -> dict:
    """The derivation the exercise asks for: model FLOPs per step from the shape (each side's weights with its own
    tokens, nmtkit.model.flops), tokens per second, and their MFU against the peak the run measured."""
    st, summary = steady_steps(run, o.skip_steps), run.status.get("summary") or {}
    peak = summary.get("peak_flops")
    vocab = summary.get("vocab_size") or (run.config.data.vocab_size if run.config else None)
    if st.empty or "src_tokens" not in st or not peak or not vocab or run.config is None:
        raise AnalysisError("per-step source and target tokens, the model's shape and the measured peak FLOP/s "
                            "(ranks/rank<R>.jsonl, config.json, run.json)")
    flops = float(np.mean([record_flops(r, run.config.model, vocab) for r in st.to_dict("records")]))
    step_s = float(st["step_time"].mean())
    return {"flops_per_step": flops, "tokens_per_s": float(st["tokens"].mean()) / step_s,
            "mfu": flops / step_s / float(peak)}


def measured_bytes_per_step(run: Run, o: Options) -> float:
    from nmtkit.course.judgments import network
    hosts = network(run, o).get("hosts") or []
    if not hosts:
        raise AnalysisError("network counters of a run with two or more nodes")
    return float(np.mean([h["bytes_per_step"] for h in hosts]))


def q5(run: Run, o: Options) -> dict:
    n, params = run.n_ranks, run.status.get("params")
    if n < 2 or not params:
        raise AnalysisError("two or more ranks and the parameter count (run.json)")
    bound = 2 * (n - 1) / n * params * bytes_per_param(run)
    return {"bytes_per_param": bytes_per_param(run), "bound_mb": bound / MB,
            "measured_over_bound": measured_bytes_per_step(run, o) / bound,
            "link_s_1g": bound * 8 / 1e9, "link_s_10g": bound * 8 / 1e10}


def q6(run: Run, o: Options) -> dict:
    cfg = profile(HOMEWORK)
    return {"lr_8k": lr.lr_for(cfg, 8000), "lr_300k": lr.lr_for(cfg, 300_000)}


def q7(run: Run, o: Options) -> dict:
    files = (run.data_stats.files if run.data_stats else None) or {}
    if not all(f in files for f in ("train.en", "train.de")):
        raise AnalysisError("the byte counts of train.en and train.de (data_stats.json)")
    total = sum(files[f]["bytes"] for f in ("train.en", "train.de"))
    return {"train_mb": total / MB, "train_mib": total / MIB}


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
    import nmtkit.analysis.machines as M
    if run.n_ranks < 2:
        raise AnalysisError("two or more ranks")
    per_step = measured_bytes_per_step(run, o)
    link_Bps = M.link_capacity(run, o)[0] * 1e9 / 8
    return {"bytes_per_step_mb": per_step / MB, "link_share": per_step / link_Bps / step_seconds(run, o)}


DECIDERS = {f"q{i}": f for i, f in enumerate((q1, q2, q3, q4, q5, q6, q7, q8, q9, q10, q11), 1)}


def decide(run: Run, options: Options | None = None) -> dict:
    """q -> {name: value} for every question the logs can decide, and "missing": {q: why} for the others."""
    o, out, missing = options or Options(), {}, {}
    for q, f in DECIDERS.items():
        try:
            out[q] = f(run, o)
        except AnalysisError as e:
            missing[q] = str(e)
    return {**out, "missing": missing}
