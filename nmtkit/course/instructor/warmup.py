"""Question 6's verdict: the run's own learning-rate curve against its config, then what the schedule's formula does
not hand over, read off the shipped warm-up ablation (nmtkit.analysis.ablation): what a shorter warm-up does to the
loss. The figures are nmtkit.course.instructor.decisions.q6's, per run. TensorFlow-free.
"""
from __future__ import annotations

from nmtkit import lr
from nmtkit.analysis import questions
from nmtkit.analysis.ablation import DEFAULT, EARLY_STEP, warmup_runs
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import Run, load_run
from nmtkit.analysis.questions import Answer, title
from nmtkit.config import profile
from nmtkit.course.instructor import decisions
from nmtkit.errors import AnalysisError


def curve(run: Run, ev: dict) -> str:
    """The run's own curve in words: its peak against the config's, and the decay's fitted exponent."""
    peak, peak_step = ev["peak_lr"], ev["peak_step"]
    if "predicted_peak_lr" not in ev:
        text = f"The curve peaks at {peak:.3g} at step {peak_step:,} (no config.json to compare with). "
    else:
        w, factor = ev["warmup_steps"], ev["rank_factor"]
        text = (f"The curve rises linearly to its peak {peak:.3g} at step {peak_step:,} (read off the curve); the "
                f"config sets warmup_steps = {w:,} and lr = {ev['lr_scale']:g} x d_model^-0.5 x "
                f"min(step^-0.5, step x warmup^-1.5) with d_model = {ev['d_model']}"
                + (f", scaled by {factor:g} for {run.n_ranks} ranks ({ev['lr_scaling']})" if factor != 1 else "")
                + f", whose peak is {ev['predicted_peak_lr']:.3g} at step {w:,}. ")
        if ev["last_step"] < w:
            text += (f"This run stopped at step {ev['last_step']:,}, still inside the warmup, so no decay is visible "
                     "yet. ")
    if "decay_exponent" in ev:
        text += (f"After the peak it decays as step^{ev['decay_exponent']:.2f} (fitted on log-log axes; inverse "
                 f"square root would be -0.50). ")
    return text


def ablation(o: Options) -> dict:
    """decisions.q6 on the shipped ablation's short run (its figures, the gaps, and both runs' own under "runs");
    empty when the runs are not installed."""
    try:
        return decisions.q6(load_run(warmup_runs()[-1]), o)
    except AnalysisError:
        return {}


def ablation_text(d: dict) -> str:
    """What the shorter warm-up did, from the two runs' own figures; the direction is read, never assumed."""
    short, long = d["runs"][d["short"]], d["runs"][DEFAULT]
    w_long, w_short = (load_run(p).config.train.warmup_steps for p in warmup_runs())
    early = "lower" if d["loss_gap_100"] < 0 else "higher"
    late = "lower" if d["final_gap"] < 0 else "higher"
    return (f"What the formula does not hand over is what the warm-up does to training; the shipped ablation "
            f"measures it. Its two runs differ only in the warm-up, {w_long} and {w_short} steps. The short one "
            f"peaks at step {short['peak_step']} at about {(w_long / w_short) ** 0.5:.0f}x the rate (the peak is "
            f"scale x d_model^-0.5 x warmup^-0.5), the long one at step {long['peak_step']}; after step {w_long} "
            f"both follow the same decay. At step {EARLY_STEP} the short warm-up's train loss is {early}: "
            f"{short['loss_at_100']:.2f} against {long['loss_at_100']:.2f} ({d['loss_gap_100']:+.2f}). At the last "
            f"evaluation (step {short['final_step']}) its eval loss is {late}: {short['final_eval_loss']:.2f} "
            f"against {long['final_eval_loss']:.2f} ({d['final_gap']:+.2f}). "
            + ("So the shorter warm-up bought an early lead and lost it by the end of this budget. The likely cause: "
               "its larger early steps, taken while Adam's moment estimates were still noisy. "
               if early == "lower" and late == "higher" else
               "Read the two gaps together: the early lead and the end state decide different things. ")
            + "One seed each: a second seed would tell how much of the gap is noise. ")


def q6_learning_rate(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(6, run, fig_dir, o)
    text = curve(run, ev)
    d = ablation(o)
    if d:
        ev["ablation"] = {k: d[k] for k in ("peak_step", "loss_gap_100", "final_gap")}
        text += ablation_text(d)
    hw = profile(decisions.HOMEWORK)
    text += (f"For scale: the homework's config (d_model 512, scale 2.0, warm-up 8,000) gives "
             f"{lr.lr_for(hw, 8000):.3g} at step 8,000 (the peak) and {lr.lr_for(hw, 300_000):.3g} at step 300,000. ")
    text += ("The shape is the schedule's doing, computed from the step number alone. Adam does not set the "
             "learning rate; it only rescales each parameter's update.")
    return Answer(6, title(6), text, ev, fig, run=run.name)
