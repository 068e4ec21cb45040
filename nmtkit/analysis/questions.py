"""The homework's 11 questions, each answered from a run's own measurements.

Every answer is an `Answer`: its number, the question, the answer in words, the numbers it rests on (evidence),
a figure, and — when the logs cannot answer — answered=False with `missing` saying what would be needed.
Nothing here guesses: no figure from the config stands in for one that should have been measured.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from nmtkit.analysis import figures
from nmtkit.analysis.logs import Run, checkpoint_info, train_set_size
from nmtkit.config import profile

TITLES = {
    1: "How long did the run take, and what would training to max_steps take and cost?",
    2: "Is the model fully trained?",
    3: "Is the model overfitting?",
    4: "Were the GPUs fully utilised?",
    5: "Was the network the bottleneck?",
    6: "What does the learning-rate plot show, and why?",
    7: "How big is the training set?",
    8: "Which files make up a TensorFlow checkpoint?",
    9: "How big is a checkpoint, and how much of it is weights vs optimizer state?",
    10: "What is the average step time?",
    11: "Is step time correlated with inter-node network throughput?",
}


@dataclass
class Answer:
    number: int
    title: str
    answer: str = ""
    evidence: dict = field(default_factory=dict)
    figure: Path | None = None
    answered: bool = True
    missing: str = ""
    run: str = ""


@dataclass
class Options:
    max_steps: int | None = None            # Q1 target; None: the run's own train.steps if it is wmt16-base, else wmt16-base's
    price_per_node_hour: float | None = None  # None: the run's cfg.monitor.price_per_node_hour
    link_gbps: float | None = None          # None: the run's cfg.monitor.link_gbps
    bytes_per_param: int = 4                # gradients are all-reduced in float32
    plateau_k: int = 3                      # Q2: judge the last k evaluations ...
    plateau_tol: float = 0.01               # ... against everything before: < 1% relative improvement = plateau
    plateau_min_bleu: float = 0.1           # ... and a BLEU gain below 0.1 points is noise either way
    gap_tol: float = 0.05                   # Q3: a gap that grew by more than this (nats) is "widening"
    busy_util: float = 80.0                 # Q4: "busy" means above this utilisation (%)
    skip_steps: int = 3                     # Q10/11: first steps of each rank (graph tracing, warm-up) left out


def missing(number: int, what: str, run: Run) -> Answer:
    return Answer(number, TITLES[number], answer=f"Cannot answer from these logs: {what}.", answered=False,
                  missing=what, run=run.name)


def _fig(fig_dir: Path | None, run: Run, number: int, name: str) -> Path | None:
    return None if fig_dir is None else Path(fig_dir) / f"{run.name}-q{number:02d}-{name}.png"


def _draw(fn, *args, path):
    return None if path is None else fn(*args, path)


# --- shared measurements ---------------------------------------------------------------------------

def steady_steps(run: Run, skip: int) -> pd.DataFrame:
    """Per-step records without each rank's first `skip` (graph tracing and warm-up are not the steady state)."""
    df = run.ranks
    if df.empty or "step_time" not in df:
        return df.iloc[0:0]
    df = df.dropna(subset=["step_time"])
    return df[df.groupby("rank").cumcount() >= skip]


def wall_clock(run: Run) -> tuple[float | None, float | None]:
    return run.wall_clock()


def progress_curve(run: Run) -> pd.DataFrame:
    """wall_time, step of rank 0 (or of the scalars): how the step count grew with the clock."""
    if not run.ranks.empty:
        r0 = run.ranks[run.ranks["rank"] == run.ranks["rank"].min()]
        return r0[["wall_time", "step"]].sort_values("wall_time").reset_index(drop=True)
    if not run.scalars.empty:
        s = run.scalars.groupby("step", as_index=False)["wall_time"].max()
        return s[["wall_time", "step"]].sort_values("wall_time").reset_index(drop=True)
    return pd.DataFrame(columns=["wall_time", "step"])


def link_iface(run: Run, mon: pd.DataFrame) -> tuple[str | None, str]:
    """The interface that carries inter-node traffic, and why it was chosen."""
    ifaces = figures.interfaces(mon)
    if not ifaces:
        return None, "the monitor logs hold no network counters"
    cfg_iface = run.config.cluster.iface if run.config else ""
    if cfg_iface and figures.iface_col(cfg_iface, "sent") in mon:
        return figures.iface_key(cfg_iface), "cluster.iface in the config"
    traffic = {i: float((mon[f"net_{i}_sent_Bps"].fillna(0) + mon[f"net_{i}_recv_Bps"].fillna(0)).mean())
               for i in ifaces}
    # Gradients dominate a distributed run's traffic, so the busiest interface is the one that carried them
    # (loopback when the "nodes" are engines on one machine).
    best = max(traffic, key=traffic.get)
    return best, ("the busiest interface during training" if best != "lo" else
                  "the busiest interface: loopback, the 'nodes' share one machine")


def in_window(mon: pd.DataFrame, run: Run) -> pd.DataFrame:
    """Monitor samples taken while training ran (samples before the first step or after the last are idle time)."""
    start, end = wall_clock(run)
    if mon.empty or start is None:
        return mon
    w = mon[(mon["time"] >= start) & (mon["time"] <= end + 1.0)]
    return w if len(w) else mon


def while_stepping(mon: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The samples whose interval (t - interval, t] overlaps a step of `steps` (one rank's records): traffic while
    training steps ran, not during evaluation, checkpointing or start-up."""
    if mon.empty or steps.empty:
        return mon.iloc[0:0]
    mon = mon.sort_values("time")
    interval = float(mon["time"].diff().median()) if len(mon) > 1 else 1.0
    st = steps.sort_values("wall_time")
    ends = st["wall_time"].to_numpy(float)
    starts = ends - st["step_time"].to_numpy(float)
    t = mon["time"].to_numpy(float)
    i = np.searchsorted(ends, t - interval, side="right")  # the first step ending inside or after the window
    ok = i < len(ends)
    ok[ok] &= starts[i[ok]] < t[ok]
    return mon[ok]


# --- the questions -----------------------------------------------------------------------------------

def q1_time_and_cost(run: Run, fig_dir, o: Options) -> Answer:
    start, end = wall_clock(run)
    curve = progress_curve(run)
    if start is None or len(curve) < 2:
        return missing(1, "step records with wall-clock times (ranks/rank<R>.jsonl or scalars.jsonl)", run)
    elapsed = end - start
    step = int(curve["step"].iloc[-1])
    # The rate over the latter 90% of the run: start-up (tracing, the first evaluation) does not recur.
    i0 = int(len(curve) * 0.1)
    dt = float(curve["wall_time"].iloc[-1] - curve["wall_time"].iloc[i0])
    ds = float(curve["step"].iloc[-1] - curve["step"].iloc[i0])
    if dt <= 0 or ds <= 0:
        return missing(1, "at least two records at different steps and times", run)
    rate = ds / dt  # steps per second, evaluation and checkpoint pauses included
    cfg = run.config
    planned = cfg.train.steps if cfg else None
    if o.max_steps:
        target, target_src = o.max_steps, "given"
    elif cfg and cfg.profile == "wmt16-base":
        target, target_src = cfg.train.steps, "train.steps of this wmt16-base run"
    else:
        target, target_src = profile("wmt16-base").train.steps, "train.steps of the wmt16-base profile"
    price = o.price_per_node_hour if o.price_per_node_hour is not None else (
        cfg.monitor.price_per_node_hour if cfg else profile("wmt16-base").monitor.price_per_node_hour)
    nodes = max(len(run.hosts), 1)
    total_h = (elapsed + max(target - step, 0) / rate) / 3600
    cost = total_h * nodes * price
    status = run.status.get("status", "unknown")
    ev = {"status": status, "elapsed_s": elapsed, "step": step, "planned_steps": planned,
          "steps_per_s": rate, "target_steps": target, "target_source": target_src, "nodes": nodes,
          "price_per_node_hour": price, "projected_hours": total_h, "projected_cost": cost}
    text = (f"The run took {_hms(elapsed)} of wall-clock time to reach step {step:,} (status: {status}), "
            f"at {rate:.3g} steps/s measured over its last 90% (evaluations and checkpoints included). ")
    if planned and step < planned:
        rest = (planned - step) / rate
        ev["remaining_s_to_planned"] = rest
        text += f"Its own plan ({planned:,} steps) needs {_hms(rest)} more. "
    text += (f"At this rate, {target:,} steps ({target_src}) take {total_h:,.1f} h on {nodes} node(s): "
             f"{nodes} x {total_h:,.1f} h x ${price:.2f}/node-hour = ${cost:,.0f}.")
    if not (cfg and cfg.profile == "wmt16-base") and not o.max_steps:
        text += " (This run's model is smaller than transformer-base, so the projection is a lower bound.)"
    fig = _draw(lambda *a: figures.progress(*a), ((curve["wall_time"] - start) / 3600).to_numpy(),
                curve["step"].to_numpy(), target, rate * 3600, path=_fig(fig_dir, run, 1, "progress"))
    return Answer(1, TITLES[1], text, ev, fig, run=run.name)


def plateau_rule(values: list[float], k: int, tol: float, higher_is_better: bool, min_abs: float = 0.0) -> tuple[bool, float]:
    """(plateaued, improvement): the best of the last k values against the best before them.

    Plateau = the improvement is at most tol relative to the earlier best (and at most min_abs absolute).
    """
    before, last = values[:-k], values[-k:]
    if higher_is_better:
        best_before, best_last = max(before), max(last)
        gain = best_last - best_before
    else:
        best_before, best_last = min(before), min(last)
        gain = best_before - best_last
    limit = max(tol * abs(best_before), min_abs)
    return gain <= limit, gain


def q2_fully_trained(run: Run, fig_dir, o: Options) -> Answer:
    k = o.plateau_k
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    if len(bleu) <= k and len(loss) <= k:
        return missing(2, f"at least {k + 1} evaluations of dev BLEU or eval loss (have {max(len(bleu), len(loss))}); "
                          f"the plateau rule compares the last {k} with those before", run)
    verdicts, ev = [], {"rule": f"plateau = the best of the last {k} evaluations improves on the best before them by "
                                f"at most {o.plateau_tol:.0%} (BLEU: and at most {o.plateau_min_bleu} points)",
                        "evaluations": int(max(len(bleu), len(loss)))}
    parts = []
    if len(bleu) > k:
        flat, gain = plateau_rule(bleu["value"].tolist(), k, o.plateau_tol, True, o.plateau_min_bleu)
        verdicts.append(flat)
        ev.update(bleu_gain_last_k=gain, bleu_plateau=flat, bleu_best=float(bleu["value"].max()),
                  bleu_last=float(bleu["value"].iloc[-1]))
        parts.append(f"dev BLEU {'has plateaued' if flat else 'is still rising'} "
                     f"({gain:+.2f} points over the last {k} evaluations; best {ev['bleu_best']:.2f})")
    if len(loss) > k:
        flat, gain = plateau_rule(loss["value"].tolist(), k, o.plateau_tol, False)
        verdicts.append(flat)
        ev.update(eval_loss_drop_last_k=gain, eval_loss_plateau=flat, eval_loss_best=float(loss["value"].min()))
        parts.append(f"eval loss {'has plateaued' if flat else 'is still falling'} "
                     f"({gain:+.3f} lower at best over the last {k} evaluations)")
    done = all(verdicts)
    ev["fully_trained"] = done
    text = (("Yes: " if done else "No: ") + "; ".join(parts) + ". "
            + ("More steps at this learning rate would buy little." if done else
               "It would still improve with more steps."))
    if len(bleu) <= k:
        text += f" (Judged on eval loss alone: only {len(bleu)} BLEU evaluations.)"
    elif len(loss) <= k:
        text += f" (Judged on BLEU alone: only {len(loss)} eval-loss evaluations.)"
    fig = _draw(lambda *a: figures.plateau(*a), bleu, loss, k, path=_fig(fig_dir, run, 2, "plateau"))
    return Answer(2, TITLES[2], text, ev, fig, run=run.name)


def loss_gap_table(run: Run) -> pd.DataFrame:
    """step, train (the last train loss logged at or before the evaluation), eval, gap at every evaluation.

    The last value, not a mean since the previous evaluation: while the loss falls fast a mean lags behind and
    would fake a widening gap.
    """
    tr, ev = run.series("train_loss"), run.series("eval_loss")
    rows = []
    for step, value in zip(ev["step"], ev["value"]):
        before = tr[tr["step"] <= step].tail(1)
        if not before.empty:
            t = float(before["value"].iloc[0])
            rows.append((int(step), t, float(value), float(value) - t))
    return pd.DataFrame(rows, columns=["step", "train", "eval", "gap"])


def q3_overfitting(run: Run, fig_dir, o: Options) -> Answer:
    g = loss_gap_table(run)
    if len(g) < 2:
        return missing(3, f"train_loss and at least 2 eval_loss evaluations (have {len(run.series('eval_loss'))} "
                          f"evaluations, {len(run.series('train_loss'))} train-loss records)", run)
    i_min = int(g["eval"].idxmin())
    eval_rising = i_min < len(g) - 1 and g["eval"].iloc[-1] > g["eval"].iloc[i_min] * (1 + o.plateau_tol)
    train_falling = g["train"].iloc[-1] < g["train"].iloc[i_min]
    # The trend over the latter half: early on, dropout makes train loss exceed eval loss, which is no signal.
    half = g.iloc[len(g) // 2:] if len(g) >= 4 else g
    slope = float(np.polyfit(half["step"], half["gap"], 1)[0])
    growth = float(half["gap"].iloc[-1] - half["gap"].iloc[:-1].min())
    widening = slope > 0 and growth > o.gap_tol
    ev = {"gap_first": float(g["gap"].iloc[0]), "gap_last": float(g["gap"].iloc[-1]), "gap_growth": growth,
          "gap_slope_per_1k_steps": slope * 1000, "eval_loss_min": float(g["eval"].iloc[i_min]),
          "eval_loss_min_step": int(g["step"].iloc[i_min]), "eval_loss_last": float(g["eval"].iloc[-1]),
          "eval_rising": bool(eval_rising), "train_falling": bool(train_falling), "widening": bool(widening)}
    gap_words = (f"the gap (eval - train loss) went from {ev['gap_first']:+.3f} to {ev['gap_last']:+.3f} "
                 f"({ev['gap_slope_per_1k_steps']:+.3f} per 1,000 steps lately)")
    if eval_rising and train_falling:
        verdict = "overfitting"
        text = (f"Yes: eval loss rose from its minimum {ev['eval_loss_min']:.3f} (step {ev['eval_loss_min_step']:,}) "
                f"to {ev['eval_loss_last']:.3f} while train loss kept falling; {gap_words}. The best checkpoint "
                f"(by dev BLEU) is the one to keep; more data, dropout or early stopping would help.")
    elif widening:
        verdict = "early signs"
        text = (f"Not yet, but watch it: {gap_words}, a widening gap, while eval loss has not risen from its "
                f"minimum. If it keeps widening, eval loss will start rising.")
    else:
        verdict = "no"
        text = (f"No: {gap_words}, and eval loss is not rising. (A train loss above eval loss is normal here: "
                f"training runs with dropout and label smoothing, evaluation without dropout.)")
    ev["verdict"] = verdict
    fig = _draw(lambda *a: figures.loss_gap(*a), g["step"], g["train"], g["eval"], path=_fig(fig_dir, run, 3, "gap"))
    return Answer(3, TITLES[3], text, ev, fig, run=run.name)


def q4_utilisation(run: Run, fig_dir, o: Options) -> Answer:
    mon = in_window(figures.per_host(run.monitor), run)
    if mon.empty:
        return missing(4, "monitor samples (monitor/<host>-rank<R>.jsonl: run training with monitor.enabled)", run)
    rows = []
    for host, df in mon.groupby("host"):
        gpu_cols = sorted(c for c in df if c.startswith("gpu") and c.endswith("_util") and df[c].notna().any())
        for c in gpu_cols or ["cpu_percent"]:
            x = df[c].dropna()
            rows.append({"host": host, "device": c.replace("_util", "").replace("_percent", ""),
                         "mean": float(x.mean()), "busy_share": float((x > o.busy_util).mean()), "samples": len(x)})
    ev = {"devices": rows, "threshold_percent": o.busy_util}
    gpus = [r for r in rows if r["device"].startswith("gpu")]
    fig = _draw(lambda r, p: figures.device_utilisation([r], p), run, path=_fig(fig_dir, run, 4, "utilisation"))
    listing = "; ".join(f"{r['host']} {r['device']}: mean {r['mean']:.0f}%, above {o.busy_util:.0f}% "
                        f"{r['busy_share']:.0%} of the time" for r in rows)
    if gpus:
        low = [r for r in gpus if r["mean"] < o.busy_util]
        ev["fully_utilised"] = not low
        text = ("Yes" if not low else "No") + f": {listing}. "
        text += ("Every GPU stayed busy." if not low else
                 "Idle GPU time means the GPUs waited: on input, on the gradient exchange, or on evaluation/"
                 "checkpointing (which the monitor sees as dips).")
    else:
        ev["fully_utilised"] = None
        text = (f"This run had no GPU (the sampler found none), so here is the CPU instead: {listing}. "
                f"On CPU the question becomes: did training keep all cores busy?")
    return Answer(4, TITLES[4], text, ev, fig, run=run.name)


def params_from_checkpoint(run: Run) -> tuple[int | None, str]:
    """The model's parameter count: run.json's "params" (written at the start), else counted in the checkpoint."""
    if isinstance(run.status.get("params"), int) and run.status["params"] > 0:
        return run.status["params"], "run.json"
    info = checkpoint_info(run.path)
    if info.weights_params:
        return info.weights_params, f"counted in {info.prefix.relative_to(run.path)}"
    return None, info.problem or "the checkpoint lists no weights"


def q5_network(run: Run, fig_dir, o: Options) -> Answer:
    n = run.n_ranks
    mon = in_window(figures.per_host(run.monitor), run)
    st = steady_steps(run, o.skip_steps)
    cfg = run.config
    link_gbps = o.link_gbps if o.link_gbps is not None else (cfg.monitor.link_gbps if cfg else None)
    if n <= 1:
        text = ("No: this is a single-rank run, so there is no gradient exchange at all; the network carried only "
                "incidental traffic. The question matters for the multi-node run.")
        ev = {"ranks": n}
        if not mon.empty:
            iface, _ = link_iface(run, mon)
            if iface:
                ev["iface"] = iface
                ev["mean_Bps"] = float(mon[[f"net_{iface}_sent_Bps", f"net_{iface}_recv_Bps"]].max(axis=1).mean())
        fig = _draw(lambda r, p: figures.network([r], p), run, path=_fig(fig_dir, run, 5, "network"))
        return Answer(5, TITLES[5], text, ev, fig, run=run.name)
    if mon.empty:
        return missing(5, "monitor samples with network counters (monitor/*.jsonl)", run)
    if st.empty:
        return missing(5, "per-step times (ranks/rank<R>.jsonl) for the step rate", run)
    if link_gbps is None:
        return missing(5, "the link capacity: set monitor.link_gbps (config.json is missing)", run)
    iface, why = link_iface(run, mon)
    if iface is None:
        return missing(5, why, run)
    params, psrc = params_from_checkpoint(run)
    if params is None:
        return missing(5, f"the parameter count for the allreduce estimate: {psrc}", run)
    link_Bps = link_gbps * 1e9 / 8  # per direction (full duplex)
    step_s = float(st["step_time"].mean())
    per_step = 2 * (n - 1) / n * params * o.bytes_per_param  # bytes each rank sends (and receives) per step
    expected_Bps = per_step / step_s
    comm_s = per_step / link_Bps  # time the allreduce needs on the link if nothing else slowed it
    hosts = []
    for host, df in mon.groupby("host"):
        mine = st[st["host"].astype(str) == str(host)]
        active = while_stepping(df, mine[mine["rank"] == mine["rank"].min()]) if not mine.empty else df
        df = active if len(active) else df  # no overlap (steps far shorter than the interval, or clocks apart)
        both = df[[f"net_{iface}_sent_Bps", f"net_{iface}_recv_Bps"]].fillna(0)
        busiest_dir = both.max(axis=1)
        ranks_here = int(run.ranks[run.ranks["host"] == host]["rank"].nunique()) if not run.ranks.empty else 1
        hosts.append({"host": host, "samples_while_stepping": len(active), "mean_Bps": float(busiest_dir.mean()), "p95_Bps": float(busiest_dir.quantile(0.95)),
                      "link_share_mean": float(busiest_dir.mean() / link_Bps), "ranks": ranks_here,
                      "expected_Bps": expected_Bps * max(ranks_here, 1)})
    peak_share = max(h["link_share_mean"] for h in hosts)
    comm_share = comm_s / step_s
    bottleneck = peak_share >= 0.7 or comm_share >= 0.5
    ev = {"ranks": n, "iface": iface, "iface_choice": why, "link_gbps": link_gbps, "link_Bps": link_Bps,
          "params": params, "params_source": psrc, "bytes_per_param": o.bytes_per_param,
          "allreduce_bytes_per_rank_per_step": per_step, "mean_step_time_s": step_s,
          "expected_Bps_per_rank": expected_Bps, "allreduce_time_on_link_s": comm_s,
          "allreduce_share_of_step": comm_share, "hosts": hosts, "bottleneck": bool(bottleneck)}
    measured = ", ".join(f"{h['host']} {h['mean_Bps'] / 1e6:.2f} MB/s mean while steps ran "
                         f"({h['link_share_mean']:.1%} of the link)" for h in hosts)
    text = (f"{'Yes' if bottleneck else 'No'}: on {iface} ({why}) the nodes moved {measured}, against a link of "
            f"{link_gbps:g} Gbit/s = {link_Bps / 1e6:.0f} MB/s per direction. A ring allreduce of {params:,} "
            f"parameters x {o.bytes_per_param} B across {n} ranks sends 2(n-1)/n x {params * o.bytes_per_param / 1e6:.1f} MB "
            f"= {per_step / 1e6:.1f} MB per rank per step, i.e. {expected_Bps / 1e6:.2f} MB/s at the measured "
            f"{step_s * 1000:.0f} ms/step; on this link that exchange alone needs {comm_s * 1000:.0f} ms, "
            f"{comm_share:.0%} of a step. ")
    if iface == "lo":
        text += (f"Here the 'nodes' share one machine, so the traffic went over loopback, whose counters see all "
                 f"{n} ranks' traffic (expected about {n} x {expected_Bps / 1e6:.2f} MB/s) and which is far faster "
                 f"than the configured link; the link figures show what the real cluster's network would face.")
    fig = _draw(lambda r, p: figures.network([r], p), run, path=_fig(fig_dir, run, 5, "network"))
    return Answer(5, TITLES[5], text, ev, fig, run=run.name)


def lr_schedule(step, d_model: int, warmup: int, scale: float) -> np.ndarray:
    """The Transformer schedule the config describes: scale * d^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    step = np.maximum(np.asarray(step, float), 1.0)
    return scale * d_model ** -0.5 * np.minimum(step ** -0.5, step * warmup ** -1.5)


def q6_learning_rate(run: Run, fig_dir, o: Options) -> Answer:
    lr = run.series("learning_rate")
    if len(lr) < 3:
        return missing(6, f"the learning_rate scalar (have {len(lr)} points)", run)
    i = int(lr["value"].idxmax())
    peak_step, peak = int(lr["step"].iloc[i]), float(lr["value"].iloc[i])
    ev = {"peak_step": peak_step, "peak_lr": peak, "last_step": int(lr["step"].iloc[-1]),
          "last_lr": float(lr["value"].iloc[-1])}
    cfg = run.config
    after = lr[lr["step"] >= max(1.5 * peak_step, peak_step + 1)]
    if len(after) >= 3:
        ev["decay_exponent"] = float(np.polyfit(np.log(after["step"]), np.log(after["value"]), 1)[0])
    text = ""
    if cfg:
        t = cfg.train
        factor = {"none": 1.0, "sqrt": math.sqrt(run.n_ranks), "linear": float(run.n_ranks)}.get(t.lr_scaling, 1.0)
        predicted = float(lr_schedule(t.warmup_steps, cfg.model.d_model, t.warmup_steps, t.lr_scale * factor))
        ev.update(warmup_steps=t.warmup_steps, lr_scale=t.lr_scale, d_model=cfg.model.d_model,
                  lr_scaling=t.lr_scaling, predicted_peak_lr=predicted)
        text = (f"The curve rises linearly to its peak {peak:.3g} at step {peak_step:,} (read off the curve); the "
                f"config sets warmup_steps = {t.warmup_steps:,} and lr = {t.lr_scale:g} x d_model^-0.5 x "
                f"min(step^-0.5, step x warmup^-1.5) with d_model = {cfg.model.d_model}"
                + (f", scaled by {factor:g} for {run.n_ranks} ranks ({t.lr_scaling})" if factor != 1 else "")
                + f", whose peak is {predicted:.3g} at step {t.warmup_steps:,}. ")
        if ev["last_step"] < t.warmup_steps:
            text += f"This run stopped at step {ev['last_step']:,}, still inside the warmup, so no decay is visible yet. "
    else:
        text = f"The curve peaks at {peak:.3g} at step {peak_step:,} (no config.json to compare with). "
    if "decay_exponent" in ev:
        text += (f"After the peak it decays as step^{ev['decay_exponent']:.2f} (fitted on log-log axes; "
                 f"inverse square root would be -0.50). ")
    text += ("This shape is the schedule's doing, computed from the step number alone: warmup keeps Adam's first "
             "updates small while its moment estimates are still noisy, then the decay anneals. Adam does not set "
             "the learning rate; it only rescales each parameter's update.")
    fig = _draw(lambda r, p: figures.learning_rate([r], p, cfg.train.warmup_steps if cfg else None), run,
                path=_fig(fig_dir, run, 6, "lr"))
    return Answer(6, TITLES[6], text, ev, fig, run=run.name)


def q7_training_set(run: Run, fig_dir, o: Options) -> Answer:
    if run.data_stats is None:
        return missing(7, "data_stats.json in the run directory (training copies it from the data directory)", run)
    size = train_set_size(run.data_stats)
    if not size or (size["bytes"] is None and size["lines"] is None):
        return missing(7, "byte and line counts of the train split in data_stats.json", run)
    ev = {"bytes": size["bytes"], "lines": size["lines"]}
    parts = []
    if size["bytes"] is not None:
        ev["mb"] = size["bytes"] / 1e6
        parts.append(f"{ev['mb']:,.1f} MB of text (both languages)")
    if size["lines"] is not None:
        parts.append(f"{int(size['lines']):,} sentence pairs (lines)")
    text = "The training set is " + " in ".join(parts) + ", as counted by data preparation (data_stats.json)."
    return Answer(7, TITLES[7], text, ev, None, run=run.name)


_FILE_ROLES = {
    "checkpoint": "a small text file naming the latest checkpoint (and the ones kept)",
    ".index": "the index: which variable lives where in the data shards, with shapes and dtypes",
    ".data-": "a data shard: the variable values themselves (weights and optimizer slots)",
}


def _role(name: str) -> str:
    base = Path(name).name
    if base == "checkpoint":
        return _FILE_ROLES["checkpoint"]
    for key, role in _FILE_ROLES.items():
        if key != "checkpoint" and key in base:
            return role
    return "other"


def q8_checkpoint_files(run: Run, fig_dir, o: Options) -> Answer:
    info = checkpoint_info(run.path, with_variables=False)
    if info.prefix is None:
        return missing(8, info.problem, run)
    files = [{"file": f, "bytes": b, "role": _role(f)} for f, b in info.files]
    text = (f"The latest checkpoint, {info.prefix.name}, is {len(files)} files: "
            + "; ".join(f"{Path(f['file']).name} ({f['bytes']:,} B) - {f['role']}" for f in files)
            + ". A prefix like ckpt-N names the set; tf.train.Checkpoint.restore takes the prefix.")
    fig = _draw(lambda l, v, p: figures.bars(l, v, p, f"Files of {info.prefix.name}", "MB"),
                [Path(f["file"]).name for f in files], [f["bytes"] / 1e6 for f in files],
                path=_fig(fig_dir, run, 8, "files"))
    return Answer(8, TITLES[8], text, {"prefix": str(info.prefix.relative_to(run.path)), "files": files}, fig,
                  run=run.name)


def q9_checkpoint_size(run: Run, fig_dir, o: Options) -> Answer:
    info = checkpoint_info(run.path)
    if info.prefix is None:
        return missing(9, info.problem, run)
    ev = {"prefix": str(info.prefix.relative_to(run.path)), "total_bytes": info.total_bytes,
          "total_mb": info.total_bytes / 1e6}
    if info.weights_bytes is None:
        a = missing(9, info.problem, run)
        a.answer = (f"The latest checkpoint takes {ev['total_mb']:.2f} MB on disk, but its weights/optimizer split "
                    f"cannot be computed: {info.problem}.")
        a.evidence = ev
        return a
    ev.update(weights_mb=info.weights_bytes / 1e6, optimizer_mb=info.optimizer_bytes / 1e6,
              other_mb=info.other_bytes / 1e6, weights_params=info.weights_params,
              optimizer_values=info.optimizer_params, variables=info.n_variables)
    ratio = info.optimizer_bytes / info.weights_bytes if info.weights_bytes else float("nan")
    ev["optimizer_to_weights"] = ratio
    text = (f"{ev['total_mb']:.2f} MB on disk ({info.prefix.name}): {ev['weights_mb']:.2f} MB of weights "
            f"({info.weights_params:,} parameters) and {ev['optimizer_mb']:.2f} MB of optimizer state "
            f"({ratio:.2f}x the weights: Adam keeps two moments, m and v, per parameter), plus "
            f"{ev['other_mb']:.3f} MB of counters and the object graph. An exported model for inference needs only "
            f"the weights.")
    fig = _draw(lambda l, v, p: figures.bars(l, v, p, "Checkpoint contents", "MB"),
                ["weights", "optimizer (Adam m, v, ...)", "other"],
                [ev["weights_mb"], ev["optimizer_mb"], ev["other_mb"]], path=_fig(fig_dir, run, 9, "split"))
    return Answer(9, TITLES[9], text, ev, fig, run=run.name)


def q10_step_time(run: Run, fig_dir, o: Options) -> Answer:
    st = steady_steps(run, o.skip_steps)
    if st.empty:
        s = run.series("step_time")
        if s.empty:
            return missing(10, "per-step times (ranks/rank<R>.jsonl) or the step_time scalar", run)
        x, source = s["value"].to_numpy(float), "the step_time scalar (averaged per log interval)"
        per_rank = {}
    else:
        x, source = st["step_time"].to_numpy(float), f"ranks/rank<R>.jsonl, first {o.skip_steps} steps of each rank left out"
        per_rank = {int(r): {"mean_ms": float(g["step_time"].mean() * 1000), "std_ms": float(g["step_time"].std() * 1000)}
                    for r, g in st.groupby("rank")}
    ev = {"source": source, "n": int(len(x)), "mean_ms": float(x.mean() * 1000),
          "std_ms": float(x.std(ddof=1) * 1000) if len(x) > 1 else 0.0, "median_ms": float(np.median(x) * 1000),
          "p10_ms": float(np.percentile(x, 10) * 1000), "p90_ms": float(np.percentile(x, 90) * 1000),
          "per_rank": per_rank}
    if not st.empty and "tokens" in st:
        ev["tokens_per_s_per_rank"] = float(st["tokens"].sum() / st["step_time"].sum())
    text = (f"{ev['mean_ms']:.1f} ms per step on average (std {ev['std_ms']:.1f} ms, median {ev['median_ms']:.1f}, "
            f"10-90% range {ev['p10_ms']:.1f}-{ev['p90_ms']:.1f} ms) over {ev['n']:,} steps, from {source}.")
    if len(per_rank) > 1:
        text += " Per rank: " + ", ".join(f"rank {r} {v['mean_ms']:.1f} ms" for r, v in per_rank.items()) + \
                " (synchronous training: every rank waits for the slowest)."
    if "tokens_per_s_per_rank" in ev:
        text += f" That is {ev['tokens_per_s_per_rank']:,.0f} tokens/s per rank."
    fig = _draw(lambda v, p: figures.histogram(v, p, "Step time", "ms/step",
                                               {"mean": ev["mean_ms"], "median": ev["median_ms"]}),
                x * 1000, path=_fig(fig_dir, run, 10, "steptime"))
    return Answer(10, TITLES[10], text, ev, fig, run=run.name)


def align_steps_to_network(run: Run, skip: int) -> tuple[pd.DataFrame, str | None, str]:
    """Pairs (net_Bps, step_time): each step is matched to the monitor sample whose interval holds its end, on
    the node of the lowest rank; steps sharing a sample are averaged (one pair per sample)."""
    st = steady_steps(run, skip)
    mon = figures.per_host(run.monitor)
    if st.empty or mon.empty:
        return pd.DataFrame(columns=["time", "net_Bps", "step_time", "steps"]), None, ""
    r0 = st[st["rank"] == st["rank"].min()].sort_values("wall_time")
    host = str(r0["host"].iloc[0])
    m = mon[mon["host"].astype(str) == host] if host in set(mon["host"].astype(str)) else mon
    iface, why = link_iface(run, m)
    if iface is None:
        return pd.DataFrame(columns=["time", "net_Bps", "step_time", "steps"]), None, why
    m = m.sort_values("time").assign(
        net_Bps=m[f"net_{iface}_sent_Bps"].fillna(0) + m[f"net_{iface}_recv_Bps"].fillna(0))[["time", "net_Bps"]]
    interval = float(m["time"].diff().median()) if len(m) > 1 else 1.0
    merged = pd.merge_asof(r0[["wall_time", "step_time"]].astype(float), m.astype(float), left_on="wall_time",
                           right_on="time", direction="forward", tolerance=1.5 * interval).dropna()
    pairs = merged.groupby("time").agg(net_Bps=("net_Bps", "first"), step_time=("step_time", "mean"),
                                       steps=("step_time", "size")).reset_index()
    return pairs, iface, why


def q11_correlation(run: Run, fig_dir, o: Options) -> Answer:
    pairs, iface, why = align_steps_to_network(run, o.skip_steps)
    if iface is None and why:
        return missing(11, why, run)
    if len(pairs) < 5:
        return missing(11, f"at least 5 monitor samples overlapping training steps (have {len(pairs)}); needs "
                           f"ranks/rank<R>.jsonl and monitor/*.jsonl from the same run", run)
    x, y = pairs["net_Bps"].to_numpy(), pairs["step_time"].to_numpy()
    if np.ptp(x) == 0:
        return missing(11, f"variation in network throughput: {iface} carried a constant {x[0]:.0f} B/s while steps "
                           f"ran (a single-process run has no inter-node traffic)", run)
    if np.ptp(y) == 0:
        return missing(11, "variation in step time (every aligned step took the same time)", run)
    r = float(np.corrcoef(x, y)[0, 1])
    strength = "strong" if abs(r) >= 0.7 else "moderate" if abs(r) >= 0.4 else "weak" if abs(r) >= 0.2 else "no real"
    ev = {"pearson_r": r, "pairs": int(len(pairs)), "iface": iface, "iface_choice": why,
          "steps_matched": int(pairs["steps"].sum()), "alignment": "each step matched by wall clock to the monitor "
          "sample whose interval contains the step's end; steps in the same sample averaged"}
    text = (f"Pearson r = {r:+.2f} between step time and {iface} throughput over {len(pairs)} one-sample windows "
            f"({ev['steps_matched']:,} steps): {strength} {'positive' if r > 0 else 'negative'} correlation. ")
    if run.n_ranks <= 1:
        text += "A single-rank run exchanges no gradients, so its network traffic is incidental and r says little. "
    elif r >= 0.4:
        text += "Slower steps coincide with more traffic: the gradient exchange is on the critical path. "
    elif r <= -0.4:
        text += ("More traffic per second comes with faster steps: the traffic follows the step rate (each step "
                 "sends the same bytes), so the network is keeping up rather than holding steps back. ")
    else:
        text += "Step time hardly moves with the traffic: something else sets the pace (compute, input). "
    text += "Correlation is not causation: evaluation pauses lower both."
    fig = _draw(lambda a, b, p: figures.scatter(a, b, p, f"Step time vs {iface} throughput (r = {r:+.2f})",
                                                f"{iface} sent + received (MB/s)", "step time (ms)"),
                x / 1e6, y * 1000, path=_fig(fig_dir, run, 11, "scatter"))
    return Answer(11, TITLES[11], text, ev, fig, run=run.name)


QUESTIONS = (q1_time_and_cost, q2_fully_trained, q3_overfitting, q4_utilisation, q5_network, q6_learning_rate,
             q7_training_set, q8_checkpoint_files, q9_checkpoint_size, q10_step_time, q11_correlation)


def answer_all(run: Run, fig_dir: str | Path | None = None, options: Options | None = None) -> list[Answer]:
    """All 11 answers for one run; a question that fails unexpectedly says so instead of sinking the report."""
    o = options or Options()
    out = []
    for number, q in enumerate(QUESTIONS, 1):
        try:
            out.append(q(run, fig_dir, o))
        except Exception as e:  # noqa: BLE001
            a = missing(number, f"the logs could not be analysed ({type(e).__name__}: {e})", run)
            out.append(a)
    return out


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"
