"""The kit's verdicts on the homework's 11 questions, in words: the instructor's half of the report.

Every answer is an `Answer` (nmtkit.analysis.questions): its number, the question, the answer in words, the numbers
it rests on (evidence: the run's measurements, nmtkit.analysis.questions.measured, plus the deciding figures of
nmtkit.course.instructor.decisions), a figure, and, when the logs cannot answer, answered=False with `missing` saying
what would be needed. Nothing here guesses: no figure from the config stands in for one that should have been measured.
Students' copies of the kit leave this module out; the plain report shows only the evidence.
"""
from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from nmtkit.analysis import evidence, questions
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import Run
from nmtkit.analysis.questions import Answer, missing, title
from nmtkit.course.instructor import decisions, judgments
from nmtkit.course.instructor.rubric import NCCL_WAIT, NVML_MEANING
from nmtkit.course.instructor.seeds import seeds_text
from nmtkit.errors import AnalysisError


def q1_time_and_cost(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(1, run, fig_dir, o)
    d = decisions.q1(run, o)
    ev.update(d)
    text = (f"The run took {_hms(ev['elapsed_s'])} of wall-clock time to reach step {ev['step']:,} (status: "
            f"{ev['status']}). Its steady steps took {d['step_s']:.3f} s each, so {d['target_steps']:,} steps of "
            f"this model at this shape and on this hardware would take {d['hours_to_target']:,.1f} h of steps "
            f"(evaluations and checkpoints extra). That says nothing about transformer-base on GPUs: a different "
            f"model on different hardware has its own step time, to be measured, not scaled. ")
    if "cost" in d:
        text += (f"On {d['nodes']} priced node(s) at USD {d['price']:.2f} per node-hour that is "
                 f"USD {d['cost']:,.0f}.")
    else:
        text += f"No cost: these ranks ran on hardware with no price ({evidence.node_price(run, o)[1]})."
    return Answer(1, title(1), text.strip(), ev, fig, run=run.name)


def q2_fully_trained(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(2, run, fig_dir, o)
    ev.update(judgments.q2(run, o))
    k, parts = o.plateau_k, []
    if "bleu_verdict" in ev:
        a, b = ev["bleu_steps"]
        shown = {"plateaued": "dev BLEU has plateaued", "rising": "dev BLEU is still rising",
                 "falling": "dev BLEU fell"}.get(ev["bleu_verdict"], "cannot tell whether dev BLEU has plateaued")
        parts.append(f"{shown}: step {b:,}'s BLEU is {ev['bleu_gain']:+.2f} points over step {a:,}'s"
                     + (f", the paired bootstrap's 95% interval {ev['bleu_gain_low']:+.2f} to "
                        f"{ev['bleu_gain_high']:+.2f} over {ev['bleu_sentences']} dev sentences" if "bleu_gain_low"
                        in ev else "") + f"; {ev['bleu_why']}")
    if "eval_loss_plateau" in ev:
        parts.append(f"eval loss {'has plateaued' if ev['eval_loss_plateau'] else 'is still falling'} "
                     f"({ev['eval_loss_drop']:+.3f} lower than {k} evaluations before, against "
                     f"{o.plateau_tol:.0%} of it)")
    done = ev["fully_trained"]
    parts.insert(0, f"by the rule stated before looking: the last evaluation against the one {k} evaluations "
                    f"earlier, plateaued when BLEU's difference has its whole 95% interval within "
                    f"+-{o.plateau_margin_bleu:g} BLEU (the equivalence margin) and eval loss dropped by at most "
                    f"{o.plateau_tol:.0%}")
    with suppress(AnalysisError):
        d = decisions.q2(run, o)
        ev.update(q2_steps=d["steps"], trained_in_steps=d["trained"])
    unsure = ev.get("bleu_verdict") == "cannot tell" and ev.get("eval_loss_plateau", True)
    text = (("Yes: " if done else "Cannot tell: " if unsure else "No: ") + "; ".join(parts) + ". "
            + ("More steps at this learning rate would buy less than the margin." if done else
               "A larger dev set would decide it; nothing here shows it has stopped improving." if unsure else
               "It would still improve with more steps."))
    text += (f" (Judged on eval loss alone: only {ev['bleu_evaluations']} BLEU evaluations.)" if "bleu_verdict" not in
             ev else f" (Judged on BLEU alone: only {ev['loss_evaluations']} eval-loss evaluations.)"
             if "eval_loss_plateau" not in ev else "")
    return Answer(2, title(2), text, ev, fig, run=run.name)


def q3_overfitting(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(3, run, fig_dir, o)
    ev.update(judgments.q3(run, o))
    first, last = ev["gap_first"], ev["gap_last"]
    trend = {"falling": "is still falling", "flat": "has stopped improving", "rising": "has risen"}[ev["eval_trend"]]
    held_out = (f"eval loss {trend} ({ev['eval_loss_first']:.3f} at the first evaluation, best "
                f"{ev['eval_loss_min']:.3f} at step {ev['eval_loss_min_step']:,}, {ev['eval_loss_last']:.3f} at the "
                "last)")
    if "bleu_trend" in ev:
        held_out += f" and dev BLEU is {ev['bleu_trend']} ({ev['bleu_last']:.2f}, best {ev['bleu_best']:.2f})"
    if ev["verdict"] == "overfitting":
        text = (f"Yes: {held_out} while train loss kept falling to {ev['train_loss_last']:.3f}: the model is fitting "
                f"the training data at the expense of unseen data. Keep the best checkpoint (by dev BLEU); more data, "
                f"more dropout or stopping earlier would help. ")
    elif ev["verdict"] == "early signs":
        text = (f"Not yet, but watch it: {held_out}, while train loss keeps falling. If eval loss turns up from "
                f"here, that is overfitting; a BLEU dip alone is within its noise on a small dev set. ")
    else:
        text = f"No: {held_out}. Overfitting shows as held-out quality getting worse, and it is not. "
    text += f"The signed gap, eval loss minus train loss, went from {first:+.3f} to {last:+.3f}. "
    if last < 0:
        text += ("Eval loss sits below train loss because the train loss is measured with dropout on (and averaged "
                 "over an interval while the weights were still improving), evaluation without dropout on the "
                 "final weights; label smoothing is in both. ")
    if ev.get("gap_crossed"):  # a sign change is no shrinking
        text += (f"It changed sign, crossing zero: eval loss went from {'above' if first > 0 else 'below'} the train "
                 f"loss to {'above' if last > 0 else 'below'} it, no overfitting by itself. ")
    elif ev["gap_size_shrank"] and first < 0:
        text += (f"Its size shrank ({abs(first):.3f} to {abs(last):.3f}); nothing here measures why, and a "
                 f"shrinking gap alone is no overfitting: a held-out loss that turns up while train loss falls is.")
    elif last > 0:
        text += ("A positive gap means the model does better on sentences it trained on than on new ones; it "
                 "matters only when it grows while eval loss stops falling.")
    return Answer(3, title(3), text.strip(), ev, fig, run=run.name)


def q4_utilisation(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(4, run, fig_dir, o)
    listing = "; ".join(f"{r['host']} {r['device']}: mean {r['mean']:.0f}%, above {o.busy_util:.0f}% "
                        f"{r['busy_share']:.0%} of the time"
                        + (f", memory peak {r['mem_peak_mib'] / 1024:.1f} of {r['mem_total_mib'] / 1024:.1f} GiB"
                           if "mem_peak_mib" in r else "") for r in ev["devices"])
    ev.update(judgments.q4(ev, o))
    mfu = ""
    with suppress(AnalysisError):
        d = decisions.q4(run, o)
        ev.update(d)
        mfu = (f" Model FLOPs {d['flops_per_step'] / 1e9:.3g} GFLOP per rank per step (each side's weights with its "
               f"own tokens) at {d['tokens_per_s']:,.0f} tokens/s per rank give MFU {d['mfu']:.1%} of the measured "
               f"peak ({ev['peak_source']}).")
    if ev["fully_utilised"] is None:
        c = judgments.cpu_cores(run, ev, ev.get("mfu"))
        ev.update(c)
        procs, n, k = ev.get("rank_processes") or [], run.n_ranks, c.get("cores_present")
        own = (f" Each sampled rank's own process used {min(p['proc_cpu_mean'] for p in procs):.0f}-"
               f"{max(p['proc_cpu_mean'] for p in procs):.0f}% of one core on average." if procs else "")
        cores = "" if not c else (
            f" Like with like, in cores: the {n} ranks kept {n} x {c['rank_cores_each']:.2f} = {c['ranks_cores']:.2f} "
            f"cores busy (the unsampled ranks taken alike), {c['ranks_share_of_busy']:.0%} of the "
            f"{c['busy_cores']:.2f} cores the system saw busy of {k}: "
            f"{'most' if c['ranks_share_of_busy'] >= 0.5 else 'part'} of the machine's work, not idle beside it. What "
            f"sat idle was the machine, {c['idle_cores']:.2f} of {k} cores, "
            + ("while the ranks waited on the gradient exchange (question 5)." if n > 1 else
               "and none of it waited on a network: with one rank no gradients leave the process; the cores it left "
               "idle are the ones its threads did not fill."))
        if "mfu_all_cores" in c:
            t = c["peak_cores"]
            cores += (f" The MFU is per rank against the peak timed on the {t:g} core(s) a rank ran on; "
                      + (f"{n} ranks on {k} cores: " if n > 1 else "")
                      + f"against the peak of all {k} cores, {n} x {ev['mfu']:.1%} x {t:g} / {k} = "
                        f"{c['mfu_all_cores']:.1%}.")
        text = (f"This run had no GPU (the sampler found none), so here is the CPU instead, as the system sees it: "
                f"{listing}.{own}{mfu}{cores} System CPU counts every process on the machine; where the 'hosts' "
                f"share one machine (the rehearsal's network namespaces, the course's local engines) it counts "
                f"every rank and the sampler together."
                + (f" A rank waiting on Gloo's allreduce sleeps in a socket read: it costs the step time but no CPU. "
                   f"On GPUs it is the other way round: {NCCL_WAIT}" if n > 1 else ""))
    elif ev["fully_utilised"]:
        text = f"Busy by NVML's measure: {listing}.{mfu} {NVML_MEANING} {NCCL_WAIT}"
    else:
        text = (f"No: {listing}.{mfu} Idle time means the GPUs waited on input or on evaluation and checkpointing. "
                f"{NVML_MEANING} {NCCL_WAIT}")
    return Answer(4, title(4), text, ev, fig, run=run.name)


def q5_network(run: Run, fig_dir, o: Options) -> Answer:
    _, fig = questions.measured(5, run, fig_dir, o)
    ev = judgments.network(run, o)
    if ev["ranks"] <= 1:
        text = ("No: this is a single-rank run, so there is no gradient exchange at all; the network carried only "
                "incidental traffic. The question matters for the multi-node run.")
        return Answer(5, title(5), text, ev, fig, run=run.name)
    n, iface, params, bpp = ev["ranks"], ev["iface"], ev["params"], ev["bytes_per_param"]
    bound, step_ms = ev["allreduce_bytes_per_rank_per_step"], ev["mean_step_time_s"] * 1000
    known = ev["link_measured"]
    verdict = (("Yes" if ev["bottleneck"] else "No") if known and iface != "lo" else
               "Cannot tell from these logs: nothing measured a link between real nodes")
    text = (f"{verdict}. {counted_words(ev)} ({ev['iface_choice']}), {ev['measured_over_bound']:.2f}x the flat "
            f"ring's bound 2(N-1)/N x {params:,} parameters x {bpp} B ({'fp16' if bpp == 2 else 'float32'} "
            f"values) = {bound / 1e6:.2f} MB (MB = 10^6 bytes) for N = {n}"
            + (f", times the {n} ring edges loopback sees" if ev["edges"] > 1 else "")
            + "; NCCL's tree or Horovod's hierarchical "
            f"allreduce send less between nodes, so that is an upper bound. The exchange needs "
            f"{ev['link_s_1g'] * 1000:.0f} ms at 1 Gbit/s and {ev['link_s_10g'] * 1000:.1f} ms at 10 Gbit/s. ")
    if known:  # a faster link replaces this run's exchange: its time beside the compute part of the step
        c = ev["compute_s"]
        text += (f"On this run's link, {ev['link_gbps']:g} Gbit/s ({ev['link_source']}), it needs "
                 f"{ev['allreduce_time_on_link_s'] * 1000:.0f} ms, {ev['allreduce_share_of_step']:.0%} of its "
                 f"{step_ms:.0f} ms step. The rest, {c * 1000:.0f} ms, is the compute; a step on a 1 Gbit/s link would "
                 f"be about {(c + ev['link_s_1g']) * 1000:.0f} ms with the exchange {ev['share_at_1g']:.0%} of it, "
                 f"on 10 Gbit/s {ev['share_at_10g']:.0%} (if the exchange ran at the link's rate).")
    else:
        text += (f"A step took {step_ms:.0f} ms. The config assumes {ev['link_gbps']:g} Gbit/s ({ev['link_source']}); "
                 f"an assumption decides nothing.")
    if iface == "lo":
        text += (" Here the 'nodes' share one machine and the traffic went over loopback, whose counters see every "
                 "ring edge; the reference run shipped with nmtkit crosses a real, shaped link.")
    return Answer(5, title(5), text, ev, fig, run=run.name)


def counted_words(net: dict) -> str:
    """Questions 5 and 11's one measured figure in words: the bytes counted per step, and per host."""
    hosts = ", ".join(f"{h['host']} {h['bytes_per_step'] / 1e6:.2f} MB" for h in net["hosts"])
    return (f"Counted between step ends on {net['iface']}: {net['counted_bytes_per_step'] / 1e6:.2f} MB per step, "
            f"the mean over the hosts ({hosts})")


def q7_training_set(run: Run, fig_dir, o: Options) -> Answer:
    ev, _ = questions.measured(7, run, fig_dir, o)
    d = decisions.q7(run, o)
    ev.update(d)
    ds = run.data_stats
    text = (f"The training set is {ds.train_mb:,.1f} MB (train.en + train.de, cleaned text) with {ds.train_lines:,} "
            f"lines, i.e. sentence pairs; {ds.train_examples:,} of them are at most {ds.max_tokens} BPE tokens long "
            f"and are used for training.")
    return Answer(7, title(7), text + f" Exactly: {d['train_mb']:.3f} MB (10^6 bytes) = "
                  f"{d['train_mib']:.3f} MiB (2^20 bytes) in train.en + train.de, as data preparation counted them "
                  f"into data_stats.json.", ev, run=run.name)


def q8_checkpoint_files(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(8, run, fig_dir, o)
    name, files = Path(ev["prefix"]).name, ev["files"]
    text = (f"The latest checkpoint, {name}, is {len(files)} files: "
            + "; ".join(f"{Path(f['file']).name} ({f['bytes']:,} B) - {f['role']}" for f in files)
            + ". A prefix like ckpt-N names the set; tf.train.Checkpoint.restore takes the prefix. The homework's "
              "TensorFlow 1 answer also lists ckpt-N.meta: TF1's tf.train.Saver stored the graph (a MetaGraphDef) "
              "beside the values. TensorFlow 2's object-based checkpoints write no .meta: the Python code rebuilds "
              "the model, and the .index records which object each value belongs to.")
    return Answer(8, title(8), text, ev, fig, run=run.name)


def q9_checkpoint_size(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(9, run, fig_dir, o)
    if "problem" in ev:
        return missing(9, ev["problem"], run, ev, f"The latest checkpoint takes {ev['total_mb']:.2f} MB on disk, but "
                                                  f"its weights/optimizer split cannot be computed: {ev['problem']}.")
    try:
        ev.update(decisions.q9(run, o))
        predicted = (f"Predicted from {run.status['params']:,} parameters before measuring: x 4 bytes x 3 (the "
                     f"weights, Adam's m and v) = {ev['predicted_mb']:.2f} MB. Measured: ")
    except AnalysisError:
        predicted = ""
    text = predicted + (f"{ev['total_mb']:.2f} MB (1 MB = 10^6 bytes) on disk ({Path(ev['prefix']).name}): "
            f"{ev['weights_mb']:.2f} MB of weights "
            f"({ev['weights_params']:,} parameters) and {ev['optimizer_mb']:.2f} MB of optimizer state "
            f"({ev['optimizer_to_weights']:.2f}x the weights: Adam keeps two moments, m and v, per parameter), plus "
            f"{ev['other_mb']:.3f} MB of counters and the object graph. An exported model for inference needs only "
            f"the weights. ")
    with suppress(AnalysisError, KeyError, TypeError):
        text += seeds_text(int(ev["total_bytes"]), int(run.status["params"]))
    return Answer(9, title(9), text, ev, fig, run=run.name)


def q10_step_time(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(10, run, fig_dir, o)
    ev.update(judgments.step_time(run, o))
    n = run.n_ranks
    text = (f"{ev['mean_ms']:.1f} ms per step on average (std {ev['std_ms']:.1f} ms, median {ev['median_ms']:.1f}, "
            f"10-90% range {ev['p10_ms']:.1f}-{ev['p90_ms']:.1f} ms) over {ev['n']:,} steps, from {ev['source']}. "
            f"A step is one synchronous optimizer update: each of the {n} rank(s) runs forward and backward on its "
            f"own batch, the gradients are averaged across ranks, and every rank applies the same update; so one "
            f"step consumes {n} x the per-rank batch")
    try:
        ev.update(tokens_per_step=decisions.q10(run, o)["tokens_per_step"])
        text += f": {ev['tokens_per_step']:,.0f} tokens per step on average, all ranks together."
    except AnalysisError:
        text += "."
    if len(ev["per_rank"]) > 1:
        text += (" Per rank: " + ", ".join(f"rank {r} {v['mean_ms']:.1f} ms" for r, v in ev["per_rank"].items())
                 + " (synchronous training: every rank waits for the slowest).")
    if "tokens_per_s_per_rank" in ev:
        text += f" That is {ev['tokens_per_s_per_rank']:,.0f} tokens/s per rank."
    return Answer(10, title(10), text, ev, fig, run=run.name)


def q11_correlation(run: Run, fig_dir, o: Options) -> Answer:
    ev, fig = questions.measured(11, run, fig_dir, o)
    r, iface = ev["pearson_r"], ev["iface"]
    if run.n_ranks <= 1:
        text = ("A single-rank run exchanges no gradients, so its network traffic is incidental: there is nothing "
                "for step time to depend on. ")
    else:
        try:
            net = judgments.network(run, o)
        except AnalysisError:
            net = None
        if net is not None and net.get("counted_bytes_per_step"):
            ev.update(bytes_per_step=net["counted_bytes_per_step"], bound_bytes=net["bound_bytes"],
                      bytes_ratio=net["measured_over_bound"], measured_share_of_step=net["measured_share_of_step"])
            text = (f"{counted_words(net)}, {net['measured_over_bound']:.2f}x the flat ring's bound "
                    f"{net['bound_bytes'] / 1e6:.2f} MB" + (f" times the {net['edges']} edges loopback sees"
                                                             if net["edges"] > 1 else "")
                    + " (question 5's figures): the traffic is the gradient exchange, the same bytes every step. So "
                      "throughput per second follows the step rate by construction, and a correlation between the "
                      "two says nothing about cause. ")
            if net["measured_share_of_step"] is not None:
                text += (f"What decides is time: on the measured link the exchange needs "
                         f"{net['measured_share_of_step']:.0%} of a step (question 5), so the network "
                         + ("does hold steps back. " if net["bottleneck"] else "is not what sets the pace. "))
            else:
                text += ("What decides is time, and no link was measured here (the config's rate is an assumption, "
                         "and an assumption decides nothing): these logs cannot say whether the network sets the "
                         "pace. ")
        else:
            text = "Without the bytes per step (question 5's inputs), r alone cannot tell cause from effect. "
    text += (f"As a description only: Pearson r = {r:+.2f} between step time and {iface} throughput over "
             f"{ev['pairs']} one-sample windows ({ev['steps_matched']:,} steps): "
             + (f"a {ev['strength']} {'positive' if r > 0 else 'negative'} correlation" if ev["strength"] != "no real"
                else "no real correlation") + " (windows without a step end are not paired).")
    return Answer(11, title(11), text, ev, fig, run=run.name)


def lab_verdict(paths=None, options: Options | None = None) -> str:
    """The kit's reading of the bottleneck lab's runs (the shipped ones by default), in Markdown, from the figures
    its checks grade against (nmtkit.course.instructor.decisions.lab)."""
    from nmtkit.analysis.lab import shipped
    d = decisions.lab(list(paths or shipped()), options)
    out = []
    if "lab_predict" in d and d["lab_predict"]["baseline_exchange_s"] == d["lab_predict"]["baseline_exchange_s"]:
        p = d["lab_predict"]
        out.append(f"The baseline ({p['baseline']}, the least link cost) is not compute alone: its exchange, timed "
                   f"alone on its ranks, took {p['baseline_exchange_s']:.3f} s of its "
                   f"{p['baseline_step_s']:.3f} s step (compute {p['compute_s']:.3f} s), "
                   f"the ring's bytes over that time an achieved {p['baseline_achieved_mbit_s']:,.0f} Mbit/s on a link "
                   f"preflight measured at {p['baseline_link_mbit_s']:,.0f} Mbit/s: there the allreduce is bound by "
                   f"the ranks' CPUs (Gloo over TCP), not by the link's rate. (Its 0.1 s samples cannot show that: "
                   f"when the exchange takes under 0.1 s, one sample reads at most a step's bytes over 0.1 s, "
                   f"whatever the link.)")
    if "lab_fit" in d:
        f, p = d["lab_fit"], d["lab_predict"]
        out.append(f"The fit over the shaped runs of one shape gives k = {f['k']:.2f} and an intercept of "
                   f"{f['intercept_s']:.3f} s against the compute's {p['compute_s']:.3f} s: step = compute + the "
                   f"ring's bytes over the measured rate {'holds' if 0.75 <= f['k'] <= 1.25 else 'does not hold'} "
                   f"here. CPU ranks send one fused allreduce after the backward pass, so no overlap explains a k "
                   f"below 1; how far k sits from 1 moves between recording sessions (docs/rehearsal.md), so these "
                   f"runs cannot tell a few percent. On the slowest link the gradients moved at "
                   f"{f['eff_mbit_s']:.0f} Mbit/s effective.")
    if "lab_fp16" in d:
        c = d["lab_fp16"]
        out.append(f"fp16 carried {c['bytes_ratio']:.2f}x the bytes of none on the slowest link, and its step took "
                   f"{c['step_ratio']:.2f}x as long.")
    if "lab_bursts" in d:
        b = d["lab_bursts"]
        out.append(f"At about 200 Mbit/s, {b['share_near_rate']:.0%} of the 0.1 s samples were within 20% of the "
                   f"link's rate while the mean was {b['mean_over_rate']:.0%} of it: the exchange runs in bursts at "
                   f"the link's rate, so a mean below capacity does not clear the network (the lab's batch was "
                   f"chosen so that the compute outweighs this exchange: the mean's share is the batch's doing).")
    if "lab_scaling" in d:
        s_ = d["lab_scaling"]
        out.append(f"Scaling by tokens per second against the cores the ranks could use: 2 ranks with a core each "
                   f"{s_['speedup_2']:.2f}x one rank on one core (ideal {s_['ideal_2']:.0f}x from the cores); 4 ranks "
                   f"on the same cores {s_['speedup_4']:.2f}x (ideal {s_['ideal_4']:.0f}x: no more cores than 2 "
                   f"ranks had{', two ranks a core' if s_['oversubscribed_4'] else ''}), the link "
                   f"{s_['link_share_4']:.0%} of the 4-rank step. On this machine ranks beyond the cores add no "
                   f"hardware.")
        if s_["compute_2_over_1"] == s_["compute_2_over_1"]:
            out.append(f"What keeps 2 ranks from their ideal: the exchange, and a 2-rank step less its exchange timed "
                       f"alone is {s_['compute_2_over_1']:.2f}x the one-rank step: each rank computes "
                       f"{'slower' if s_['compute_2_over_1'] > 1.05 else 'about as fast'} with both cores busy. "
                       f"Why, this machine cannot tell: its cores are virtual, and two of them may share a physical "
                       f"core or memory bandwidth on a host the guest does not see.")
    out += [f"*Cannot decide {q}:* {why}." for q, why in d["missing"].items()]
    return " ".join(out)


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"
