"""The kit's yes/no judgments on the evidence: the rules that turn a run's measurements into a verdict (plateaued,
overfitting, busy, bottleneck). The course's half: the plain report and a student's release carry the measurements
(nmtkit.analysis) and leave the judging to the student; the instructor's verdicts (nmtkit.course.instructor.verdicts)
and decisions (nmtkit.course.instructor.decisions) add these.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from nmtkit import monitor
from nmtkit.analysis.evidence import (
    Options,
    bytes_per_param,
    loss_gap_table,
    one_machine,
    paired_bleu,
    steady_steps,
    step_times,
    tokens_per_s,
)
from nmtkit.analysis.logs import Run
from nmtkit.analysis.machines import first_rank_steps, in_window, measure_network, per_host
from nmtkit.errors import AnalysisError
from nmtkit.ring import ring_bytes


def best_gain(values: list[float], k: int, higher_is_better: bool) -> float:
    """How much the best of the last k values improves on the best before them."""
    before, last = values[:-k], values[-k:]
    return max(last) - max(before) if higher_is_better else min(before) - min(last)


def plateau_rule(values: list[float], k: int, tol: float, higher_is_better: bool,
                 min_abs: float = 0.0) -> tuple[bool, float]:
    """(plateaued, improvement): the best of the last k values against the best before them. Plateau = the
    improvement is at most tol relative to the earlier best (and at most min_abs absolute)."""
    gain = best_gain(values, k, higher_is_better)
    best_before = (max if higher_is_better else min)(values[:-k])
    return gain <= max(tol * abs(best_before), min_abs), gain


def bleu_rule(run: Run, bleu: pd.DataFrame, k: int, o: Options) -> dict:
    """Dev BLEU's plateau, decided by a paired bootstrap over the dev sentences (Koehn 2004): the best evaluation of
    the last k against the best before them, both scored on the same resampled sentences. "plateaued" when the
    gain's 95% interval lies within the tolerance (the larger of plateau_tol of the earlier best and
    plateau_min_bleu), "rising" when it lies above it, else "cannot tell"; also "cannot tell" on fewer than
    o.bleu_min_sentences dev sentences (too few for the bootstrap to be trusted) or without the translations."""
    values, steps = bleu["value"].tolist(), bleu["step"].tolist()
    before, last = int(np.argmax(values[:-k])), len(values) - k + int(np.argmax(values[-k:]))
    gain, tol = values[last] - values[before], max(o.plateau_tol * abs(values[before]), o.plateau_min_bleu)
    out = {"bleu_gain": gain, "bleu_tolerance": tol, "bleu_steps": (int(steps[before]), int(steps[last]))}
    try:
        pb = paired_bleu(run, steps[before], steps[last])
    except AnalysisError as e:
        return {**out, "bleu_verdict": "cannot tell", "bleu_why": f"no paired bootstrap: {e}"}
    out.update(bleu_gain_low=pb["low"], bleu_gain_high=pb["high"], bleu_p_value=pb["p_value"],
               bleu_sentences=pb["sentences"])
    if pb["sentences"] < o.bleu_min_sentences:
        verdict, why = "cannot tell", (f"{pb['sentences']} dev sentences are too few for a bootstrap to be trusted "
                                       f"(the kit's floor is {o.bleu_min_sentences}; Koehn 2004 validated it on "
                                       f"300 and more)")
    elif pb["high"] <= tol:
        verdict, why = "plateaued", "the whole interval lies within the tolerance"
    elif pb["low"] > tol:
        verdict, why = "rising", "the whole interval lies above the tolerance"
    else:
        verdict, why = "cannot tell", "the interval straddles the tolerance"
    return {**out, "bleu_verdict": verdict, "bleu_why": why}


def q2(run: Run, o: Options) -> dict:
    """bleu_verdict (bleu_rule's) and bleu_plateau, eval_loss_plateau (for each curve with more than k
    evaluations) and fully_trained: every such curve shown to have plateaued."""
    k, out = o.plateau_k, {}
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    if len(bleu) > k:
        out.update(bleu_rule(run, bleu, k, o))
        out["bleu_plateau"], out["bleu_gain_last_k"] = out["bleu_verdict"] == "plateaued", out["bleu_gain"]
    if len(loss) > k:
        out["eval_loss_plateau"], out["eval_loss_drop_last_k"] = plateau_rule(loss["value"].tolist(), k,
                                                                              o.plateau_tol, False)
    out["fully_trained"] = all(v for key, v in out.items() if key.endswith("_plateau"))
    return out


def step_time(run: Run, o: Options) -> dict:
    """Question 10's mean and median (ms), each rank's mean, and tokens/s per rank."""
    x, _, st = step_times(run, o)
    out = {"mean_ms": float(x.mean() * 1000), "median_ms": float(np.median(x) * 1000),
           "per_rank": {int(r): {"mean_ms": float(g["step_time"].mean() * 1000)} for r, g in st.groupby("rank")}}
    if not st.empty and "tokens" in st:
        out["tokens_per_s_per_rank"] = tokens_per_s(st)
    return out


def q3(run: Run, o: Options) -> dict:
    """Overfitting decided on the held-out trends: eval_trend, train_falling, bleu_trend, verdict."""
    g = loss_gap_table(run)
    i_min = int(g["eval"].idxmin())
    eval_rising = i_min < len(g) - 1 and g["eval"].iloc[-1] > g["eval"].iloc[i_min] * (1 + o.plateau_tol)
    train_falling = bool(g["train"].iloc[-1] < g["train"].iloc[i_min]) if i_min < len(g) - 1 else True
    eval_stalled = len(g) > o.plateau_k and plateau_rule(list(g["eval"]), o.plateau_k, o.plateau_tol, False)[0]
    out = {"eval_trend": "rising" if eval_rising else "flat" if eval_stalled else "falling",
           "train_falling": train_falling,
           "gap_size_shrank": bool(abs(g["gap"].iloc[-1]) < abs(g["gap"].iloc[0])),
           # a gap that changed sign crossed zero: it did not shrink (eval loss went from above train to below it)
           "gap_crossed": bool(np.sign(g["gap"].iloc[-1]) * np.sign(g["gap"].iloc[0]) < 0)}
    bleu = run.series("Eval_BLEU_Score")
    bleu_falling = False
    if len(bleu) >= 2:
        best, last = float(bleu["value"].max()), float(bleu["value"].iloc[-1])
        bleu_falling = best - last > max(0.5, 0.02 * best)
        out["bleu_trend"] = "falling" if bleu_falling else "at its best" if last >= best - 1e-9 else "near its best"
    gap_rising = float(g["gap"].iloc[-1] - g["gap"].iloc[0]) > o.gap_tol
    # Decided on the held-out loss: BLEU on a few hundred dev sentences is noisy (a dip at BLEU 2 proves nothing),
    # so a BLEU drop alone only calls for watching.
    out["verdict"] = ("overfitting" if train_falling and eval_rising else
                      "early signs" if train_falling and ((eval_stalled and gap_rising) or bleu_falling) else "no")
    return out


def q4(ev: dict, o: Options) -> dict:
    """fully_utilised: every GPU's mean utilisation at or above the threshold; None without a GPU."""
    gpus = [r for r in ev["devices"] if r["device"].startswith("gpu")]
    return {"fully_utilised": all(r["mean"] >= o.busy_util for r in gpus) if gpus else None}


def cpu_cores(run: Run, ev: dict, mfu: float | None = None) -> dict:
    """Question 4 on CPUs, like with like, in cores: the cores the ranks' own processes kept busy (each sampled
    rank's mean % of one core; the unsampled ranks taken alike) against the cores the system saw busy and the
    cores present; and, with the per-rank MFU (against one rank's own peak), the ranks' arithmetic over the peak of
    every core present. {} without the samples."""
    procs, cpus, n = ev.get("rank_processes") or [], [d for d in ev["devices"] if d["device"] == "cpu"], run.n_ranks
    cores = ev.get("cpu_count")
    if not procs or not cpus or not cores:
        return {}
    per_rank = float(np.mean([p["proc_cpu_mean"] for p in procs])) / 100
    shared = one_machine(run)
    # on one machine every host's sampler sees the same cores: their mean is the machine's; else each host its own
    busy = float(np.mean([d["mean"] for d in cpus])) / 100 * cores * (1 if shared else len(cpus))
    present = cores * (1 if shared else len(cpus))
    out = {"one_machine": shared, "rank_cores_each": per_rank, "ranks_cores": n * per_rank, "busy_cores": busy,
           "cores_present": present, "ranks_share_of_busy": n * per_rank / busy if busy else float("nan"),
           "idle_cores": present - busy}
    if mfu is not None:
        out["mfu_all_cores"] = n * mfu / present  # per-rank MFU is against one rank's own peak (its own thread)
    return out


def network(run: Run, o: Options) -> dict:
    """Question 5's figures on the plain measurements (nmtkit.analysis.machines.measure_network): the flat ring's
    bound, the bytes counted per step on each node's link, the exchange's time on the link and its share of a step,
    and the bottleneck verdict."""
    o = replace(o, bytes_per_param=bytes_per_param(run))
    ev = measure_network(run, o)
    n = ev["ranks"]
    if n <= 1:
        return ev
    st, mon = steady_steps(run, o.skip_steps), in_window(per_host(run.monitor), run)
    iface, link_Bps = ev["iface"], ev["link_gbps"] * 1e9 / 8  # per direction (full duplex)
    step_s = float(st["step_time"].mean())
    per_step = ring_bytes(ev["params"], n, o.bytes_per_param)  # bytes each rank sends (and receives) per step
    comm_s = per_step / link_Bps  # time the allreduce needs on the link if nothing else slowed it
    for h in ev["hosts"]:
        # The ring visits ranks in rank order, node by node: each node has one ring edge out to the next node
        # and one in, whatever its ranks per node, so its link carries one rank's share; loopback sees every edge.
        edges = n if iface == "lo" else 1
        mine = first_rank_steps(st, h["host"])
        counted = bytes_per_step(mon[mon["host"] == h["host"]], iface, mine) if not mine.empty else None
        h.update(link_share_mean=h["mean_Bps"] / link_Bps, expected_Bps=per_step / step_s * edges,
                 # without a counted figure (no steps on this node's samples): the rate times the step time
                 **(counted or {"bytes_per_step": h["mean_Bps"] * step_s,
                                "bytes_per_step_source": "mean rate while steps ran x mean step time"}),
                 expected_bytes_per_step=per_step * edges)
    # a faster link replaces this run's exchange, it does not add to it: its time belongs beside the compute part
    # of the step (the step minus its own exchange on its own link), not beside a step that already holds one
    compute_s, at_1g, at_10g = max(step_s - comm_s, 0.0), per_step * 8 / 1e9, per_step * 8 / 1e10
    ev.update(bytes_per_param=o.bytes_per_param, link_Bps=link_Bps, allreduce_bytes_per_rank_per_step=per_step,
              mean_step_time_s=step_s, expected_Bps_per_rank=per_step / step_s, allreduce_time_on_link_s=comm_s,
              allreduce_share_of_step=comm_s / step_s, link_s_1g=at_1g, link_s_10g=at_10g, compute_s=compute_s,
              share_at_1g=at_1g / (compute_s + at_1g), share_at_10g=at_10g / (compute_s + at_10g))
    ev["bottleneck"] = bottleneck(ev)
    return ev


def counted_bytes(mon: pd.DataFrame, iface: str, direction: str, times) -> np.ndarray:
    """Bytes an interface counted from its first sample to each of `times` (epoch s): a sample's rate covers the
    interval since the sample before it (the first: one median interval), linear within it."""
    mon = mon.sort_values("time")
    t = mon["time"].to_numpy(float)
    rate = mon[monitor.net_col(iface, direction)].fillna(0).to_numpy(float)
    dt = np.diff(t, prepend=t[0] - (float(np.median(np.diff(t))) if len(t) > 1 else 1.0))
    return np.interp(np.asarray(times, float), np.concatenate([[t[0] - dt[0]], t]),
                     np.concatenate([[0.0], np.cumsum(rate * dt)]))


def bytes_per_step(mon: pd.DataFrame, iface: str, steps: pd.DataFrame) -> dict | None:
    """Bytes the busier direction of `iface` carried per step, counted between the end of the first and of the last
    of `steps` (one rank's records): evaluation pauses in between add their (small) traffic but no steps.
    None when the samples do not span two step ends."""
    if len(mon) < 2:
        return None
    # only the steps that ended while this node's sampler counted (it starts and stops beside its rank)
    steps = steps[steps["wall_time"].between(mon["time"].min(), mon["time"].max())].sort_values("wall_time")
    if len(steps) < 2:
        return None
    ends = steps["wall_time"].to_numpy(float)[[0, -1]]
    sent, recv = (counted_bytes(mon, iface, d, ends) for d in monitor.NET_DIRECTIONS)
    total = max(sent[1] - sent[0], recv[1] - recv[0])
    n = len(steps) - 1
    first, last = int(steps["step"].iloc[0]), int(steps["step"].iloc[-1])
    return {"bytes_per_step": float(total / n), "bytes_counted": float(total), "steps_counted": int(n),
            "bytes_per_step_source": f"the {iface} counters (monitor samples), busier direction, from the end of "
                                     f"step {first} to the end of step {last}"}


def bottleneck(net: dict) -> bool:
    """The network holds steps back when a node's link ran at 70%+ of its capacity while steps ran, or the
    exchange needs half a step or more on the link."""
    return bool(max(h["link_share_mean"] for h in net["hosts"]) >= 0.7 or net["allreduce_share_of_step"] >= 0.5)
