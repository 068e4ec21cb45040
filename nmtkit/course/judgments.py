"""The kit's yes/no judgments on the evidence: the rules that turn a run's measurements into a verdict (plateaued,
overfitting, busy, bottleneck). The course's half: the plain report and a student's release carry the measurements
(nmtkit.analysis) and leave the judging to the student; the instructor's verdicts (nmtkit.course.verdicts) and
decisions (nmtkit.course.decisions) add these.
"""
from __future__ import annotations

from nmtkit.analysis.evidence import Options, best_gain, loss_gap_table
from nmtkit.analysis.logs import Run


def plateau_rule(values: list[float], k: int, tol: float, higher_is_better: bool, min_abs: float = 0.0) -> tuple[bool, float]:
    """(plateaued, improvement): the best of the last k values against the best before them. Plateau = the
    improvement is at most tol relative to the earlier best (and at most min_abs absolute)."""
    gain = best_gain(values, k, higher_is_better)
    best_before = (max if higher_is_better else min)(values[:-k])
    return gain <= max(tol * abs(best_before), min_abs), gain


def q2(run: Run, o: Options) -> dict:
    """bleu_plateau / eval_loss_plateau (for each curve with more than k evaluations) and fully_trained."""
    k, out = o.plateau_k, {}
    bleu, loss = run.series("Eval_BLEU_Score"), run.series("eval_loss")
    if len(bleu) > k:
        out["bleu_plateau"] = plateau_rule(bleu["value"].tolist(), k, o.plateau_tol, True, o.plateau_min_bleu)[0]
    if len(loss) > k:
        out["eval_loss_plateau"] = plateau_rule(loss["value"].tolist(), k, o.plateau_tol, False)[0]
    out["fully_trained"] = all(out.values())
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
           "gap_size_shrank": bool(abs(g["gap"].iloc[-1]) < abs(g["gap"].iloc[0]))}
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


def bottleneck(net: dict) -> bool:
    """The network holds steps back when a node's link ran at 70%+ of its capacity while steps ran, or the
    exchange needs half a step or more on the link."""
    return bool(max(h["link_share_mean"] for h in net["hosts"]) >= 0.7 or net["allreduce_share_of_step"] >= 0.5)
