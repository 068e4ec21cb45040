"""The kit's yes/no judgments on the evidence: the rules that turn a run's measurements into a verdict (plateaued,
overfitting, busy, bottleneck). The course's half: the plain report and a student's release carry the measurements
(nmtkit.analysis) and leave the judging to the student; the instructor's verdicts (nmtkit.course.instructor.verdicts)
and decisions (nmtkit.course.instructor.decisions) add these.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

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
from nmtkit.analysis.machines import (
    bytes_per_step,
    counted_per_step,
    first_rank_steps,
    in_window,
    measure_network,
    per_host,
)
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


def q2_pair(series: pd.DataFrame, k: int, at: int | None = None) -> tuple[int, int]:
    """Question 2's two evaluations: the last (or the one at step `at`) and the one k evaluations before it, fixed in
    advance (steps, not the best of a window: two post-hoc maxima would bias the gain upward)."""
    steps = [int(s) for s in series["step"]]
    b = len(steps) - 1 if at is None else steps.index(int(at))
    if b < k:
        raise AnalysisError(f"{k + 1} evaluations up to step {steps[b]:,} (have {b + 1}): question 2 compares an "
                            f"evaluation with the one {k} before it")
    return steps[b - k], steps[b]


def bleu_rule(run: Run, bleu: pd.DataFrame, k: int, o: Options, at: int | None = None) -> dict:
    """Dev BLEU's plateau by equivalence: the evaluation at `at` (default the last) against the one k evaluations
    earlier, both scored on the same resampled dev sentences (the paired bootstrap, Koehn 2004). "plateaued" when
    the difference's whole 95% interval lies within +-o.plateau_margin_bleu, "rising" when it lies above zero (and
    not within the margin), "falling" below zero, else "cannot tell"; also "cannot tell" on fewer than
    o.bleu_min_sentences dev sentences or without the evaluations' sentence statistics."""
    a, b = q2_pair(bleu, k, at)
    value = dict(zip(bleu["step"].astype(int), bleu["value"]))
    m = o.plateau_margin_bleu
    out = {"bleu_gain": float(value[b] - value[a]), "bleu_margin": m, "bleu_steps": (a, b), "bleu_k": k}
    try:
        pb = paired_bleu(run, a, b)
    except AnalysisError as e:
        return {**out, "bleu_verdict": "cannot tell", "bleu_why": f"no paired bootstrap: {e}"}
    out.update(bleu_gain_low=pb["low"], bleu_gain_high=pb["high"], bleu_p_value=pb["p_value"],
               bleu_sentences=pb["sentences"])
    if pb["sentences"] < o.bleu_min_sentences:
        verdict, why = "cannot tell", (f"{pb['sentences']} dev sentences are too few for a bootstrap to be trusted "
                                       f"(the kit's floor is {o.bleu_min_sentences}; Koehn 2004 validated it on "
                                       f"300 and more)")
    elif -m <= pb["low"] and pb["high"] <= m:
        verdict, why = "plateaued", f"the whole interval lies within +-{m:g} BLEU"
    elif pb["low"] > 0:
        verdict, why = "rising", "the whole interval lies above zero and reaches past the margin"
    elif pb["high"] < 0:
        verdict, why = "falling", "the whole interval lies below zero and reaches past the margin"
    else:
        verdict, why = "cannot tell", "the interval straddles zero and reaches past the margin"
    return {**out, "bleu_verdict": verdict, "bleu_why": why}


def loss_rule(loss: pd.DataFrame, k: int, o: Options) -> tuple[bool, float]:
    """(plateaued, drop): eval loss k evaluations before the last minus the last; plateaued when the drop is at most
    o.plateau_tol of the earlier loss."""
    a, b = q2_pair(loss, k)
    value = dict(zip(loss["step"].astype(int), loss["value"]))
    drop = float(value[a] - value[b])
    return drop <= o.plateau_tol * abs(value[a]), drop


def q2(run: Run, o: Options) -> dict:
    """bleu_verdict (bleu_rule's) and bleu_plateau, eval_loss_plateau (for each curve with more than k
    evaluations) and fully_trained: every such curve shown to have plateaued."""
    k, out = o.plateau_k, {}
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    if len(bleu) > k:
        out.update(bleu_rule(run, bleu, k, o))
        out["bleu_plateau"] = out["bleu_verdict"] == "plateaued"
    if len(loss) > k:
        out["eval_loss_plateau"], out["eval_loss_drop"] = loss_rule(loss, k, o)
    out["fully_trained"] = bool(any(key.endswith("_plateau") for key in out)
                                and all(v for key, v in out.items() if key.endswith("_plateau")))
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
        # each rank's MFU is against the peak timed on the cores that rank ran on (its affinity in the rank logs;
        # one core where a run's logs do not say): every core's peak is the cores present, not halved again
        t = peak_cores(run)
        out.update(peak_cores=t, mfu_all_cores=n * mfu * t / present)
    return out


def peak_cores(run: Run) -> float:
    """The cores one rank's peak was timed on: the mean size of the ranks' affinity (rank logs), else 1."""
    r = run.ranks
    sizes = [len(a) for a in r["affinity"] if isinstance(a, list)] if "affinity" in r else []
    return float(np.mean(sizes)) if sizes else 1.0


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
    ev.update(exchange(run, ev, mon, o))
    return ev


def exchange(run: Run, net: dict, mon, o: Options) -> dict:
    """Questions 5 and 11's one bound and one ratio: the flat ring's bound per rank, the bytes the link counted per
    step (machines.counted_per_step: between step ends, the mean over the hosts), their ratio against what the
    interface carries (the bound, times the ranks on loopback, which sees every ring edge), and the exchange's share
    of a step on the link only where preflight measured it (None on an assumed link: an assumption decides
    nothing)."""
    edges = net["ranks"] if net["iface"] == "lo" else 1
    bound = net["allreduce_bytes_per_rank_per_step"]
    counted = counted_per_step(run, mon, net["iface"], o)
    measured = not net["link_source"].startswith("assumed")
    per_step = counted.get("bytes_per_step")
    return {"bound_bytes": bound, "edges": edges, "counted_bytes_per_step": per_step,
            "measured_over_bound": per_step / (bound * edges) if per_step else None, "link_measured": measured,
            "measured_share_of_step": net["allreduce_share_of_step"] if measured else None}


def bottleneck(net: dict) -> bool:
    """The network holds steps back when a node's link ran at 70%+ of its capacity while steps ran, or the
    exchange needs half a step or more on the link."""
    return bool(max(h["link_share_mean"] for h in net["hosts"]) >= 0.7 or net["allreduce_share_of_step"] >= 0.5)
