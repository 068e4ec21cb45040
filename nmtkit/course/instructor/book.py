"""One record per question, the instructor's side: each student-side `Question` (nmtkit.question, registered in
nmtkit.analysis.questions.book) extended with its decider (the figures the kit's answer rests on), its verdict in
words, its rubric (items with points and the misconception each targets) and whether it is graded on the shipped
runs or on the student's own. `book` holds them keyed by question; everything the instructor's kit does per
question (`nk.check`'s graded comparison, `nmtkit grade`, the verdicts, the rubric, the variants' answers) asks it.
`nmtkit release` drops this module whole with the rest of the instructor's folder.

    from nmtkit.course.instructor.book import book, decide, answer_all
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nmtkit.analysis import questions
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import Run
from nmtkit.analysis.questions import Answer, guarded
from nmtkit.course.instructor import decisions, verdicts
from nmtkit.course.instructor.rubric import Item, render
from nmtkit.course.instructor.warmup import q6_learning_rate
from nmtkit.errors import AnalysisError
from nmtkit.question import Question


@dataclass(frozen=True)
class Marking:
    question: Question
    decide: Callable | None = None    # (run, Options) -> {figure: value}; None: decided on the lab's table
    verdict: Callable | None = None   # (run, fig_dir, Options) -> Answer; None: verdicts.lab_verdict's part
    rubric: tuple[Item, ...] = ()
    on_shipped: bool = False          # graded on the shipped runs (the variant's), not on the student's own
    grader_hand: str = ""             # graded by hand by `nmtkit grade` only, why (nk.check still says right or wrong)

    @property
    def key(self) -> str:
        return self.question.key


class Book(dict):
    """key -> Marking; `add` takes the student-side record from nmtkit.analysis.questions.book by key."""

    def add(self, key: str, **kw) -> Marking:
        self[key] = Marking(questions.book[key], **kw)
        return self[key]

    def homework(self) -> list[Marking]:
        return sorted((m for m in self.values() if not m.question.lab), key=lambda m: m.question.number)


book = Book()


def hand_graded(key: str, grader: bool = False) -> str | None:
    """Why question `key`'s check is graded by hand for now, else None: the one place `nk.check` (grader=False) and
    `nmtkit grade` (grader=True) ask."""
    m = book.get(key)
    why = m.question.hand_graded if m else ""
    return why or (m.grader_hand if m and grader else "") or None


def decide(run: Run, options: Options | None = None) -> dict:
    """q -> {name: value} for every question the logs of `run` can decide, and "missing": {q: why} for the others."""
    o, out, missing = options or Options(), {}, {}
    for key, m in book.items():
        if m.decide is None:
            continue
        try:
            out[key] = m.decide(run, o)
        except AnalysisError as e:
            missing[key] = str(e)
    return {**out, "missing": missing}


def answer(run: Run, number: int, fig_dir: str | Path | None = None, options: Options | None = None) -> Answer:
    """Question `number` alone, with the kit's verdict."""
    m = next(m for m in book.homework() if m.question.number == number)
    return guarded(number, run, lambda: m.verdict(run, fig_dir, options or Options()))


def answer_all(run: Run, fig_dir: str | Path | None = None, options: Options | None = None) -> list[Answer]:
    """Every numbered question's answer for one run; one that fails unexpectedly says so instead of sinking the
    report."""
    o = options or Options()
    return [guarded(m.question.number, run, lambda m=m: m.verdict(run, fig_dir, o)) for m in book.homework()]


def rubric_by_number() -> dict[int, str]:
    """number -> the rubric in words, for the report."""
    return {m.question.number: render(m.rubric) for m in book.homework()}


def lab_rubric() -> str:
    """The lab's parts' rubrics in words, one paragraph."""
    return " ".join(f"{m.key}: {render(m.rubric)}" for m in book.values() if m.question.lab)


def write_instructor_report(runs, out_dir: str | Path | None = None, options: Options | None = None) -> Path:
    """report.md and report.json with the kit's verdicts and the rubric (`nmtkit report --instructor`)."""
    from nmtkit.analysis.report import write_report
    from nmtkit.files import atomic_write_text
    md = write_report(runs, out_dir, options, instructor=True, answers=answer_all, rubric=rubric_by_number())
    try:  # notebook 04's lab reads the shipped lab runs, whichever runs this report is about
        lab = verdicts.lab_verdict(options=options)
    except AnalysisError as e:
        lab = f"**Not answered.** {e}"
    return atomic_write_text(md, md.read_text() + f"\n## The bottleneck lab (the shipped lab runs)\n\n{lab}\n\n"
                                                  f"**Rubric.** {lab_rubric()}\n")


I = Item  # noqa: E741  the records below read as a list of items
book.add("q1", decide=decisions.q1, verdict=verdicts.q1_time_and_cost, rubric=(
    I("the hours the homework's step count takes at this run's own steady seconds per step, said to hold for this "
      "model at this shape only", 2, "scaling a small CPU model's rate up to transformer-base on GPUs"),
    I("a cost only for hardware that is named and priced", 1, "pricing local processes as cloud VMs"),
    I("the steady steps, not the elapsed time", 1, "quoting the run's elapsed minutes as the answer")))
book.add("q2", decide=decisions.q2, verdict=verdicts.q2_fully_trained, rubric=(
    I("a rule stated in steps before looking: the last evaluation against the one k evaluations earlier (k "
      "stated), with an equivalence margin in BLEU (at most 1 BLEU, or why more)", 2,
      "max(BLEU) or the last step number as the evidence; two post-hoc maxima compared"),
    I("BLEU's difference judged by the paired bootstrap over the dev sentences: plateaued when the whole 95% "
      "interval lies within the margin, rising when it lies above it, else cannot tell", 2,
      "one BLEU's spread used as the noise of a difference of two; a gain on a handful of sentences taken as "
      "proof either way"),
    I("eval loss judged alike, and a verdict that follows from both", 1, "'the loss is low, so it is trained'")))
book.add("q3", decide=decisions.q3, verdict=verdicts.q3_overfitting, rubric=(
    I("decided on the held-out loss: did it turn up from its best while the train loss kept falling? with the "
      "step of the best", 3, "'fully trained, so overfitting' (a plateau is not overfitting)"),
    I("the signed gap read for what it is", 1, "the sign of eval minus train loss as the verdict (dropout is on "
      "while training only); a dip of a BLEU near 2 as proof")))
book.add("q4", decide=decisions.q4, verdict=verdicts.q4_utilisation, on_shipped=True, rubric=(
    I("MFU derived per side from the shape (encoder weights x source tokens, decoder weights and the output "
      "projection x target tokens, attention over the padded lengths, backward twice the forward), per second of "
      "steady step, over the measured peak", 2, "6 x parameters x (source + target) tokens (twice the work)"),
    I("on CPUs, like with like in cores: the ranks' own processes against the cores the machine had busy and the "
      "cores present; what idled named, and against which peak the MFU is (a peak timed on every core is not "
      "halved again); a one-rank run has no exchange to wait on", 1,
      "system CPU as the ranks' work; 'the ranks were idle' from a rank's percent of one core beside the "
      "machine's percent of all; a wait on the gradient exchange in a one-rank run"),
    I("on GPUs, what utilisation cannot show: NVML counts a GPU busy while any kernel runs, NCCL's included; "
      "memory at 100% is TensorFlow's reservation, no load figure", 1,
      "'100% utilisation, so no network wait'; a screenshot of nvidia-smi as a measurement")))
book.add("q5", decide=decisions.q5, verdict=verdicts.q5_network, on_shipped=True, rubric=(
    I("the measured bytes per step against the flat ring's bound 2(N-1)/N x parameters x bytes per value (2 under "
      "fp16), the bound as an upper bound", 2, "4 bytes per value under fp16; the flat ring's figure as exact for "
      "tree or hierarchical allreduce; MiB labelled MB"),
    I("the exchange's time on the measured link against the compute part of the step; no verdict from an assumed "
      "link", 1, "'the average rate was below the link's capacity, so not the bottleneck' (bursts between "
      "computations)"),
    I("which link was measured, and a rate far below the bound questioned", 1,
      "loopback or the management interface taken for the data link; bytes read as bits, MB/s as Mbit/s")))
book.add("q6", decide=decisions.q6, verdict=q6_learning_rate, on_shipped=True, rubric=(
    I("from the two shipped warm-up runs' own logs, the short run's peak step read off its curve", 1,
      "the rates recomputed from the formula as the answer (notebook 02 did that)"),
    I("the gaps, short minus default, in the train loss at step 100 and in the last eval loss, both weighed: the "
      "short warm-up leads early and trails at the end, the gap made early", 2,
      "the early lead alone as 'a shorter warm-up trains faster'; 'Adam's adaptivity makes the warm-up'"),
    I("one seed each named as the limit", 1, "a gap from one seed called certain")))
book.add("q7", decide=decisions.q7, verdict=verdicts.q7_training_set, rubric=(
    I("the files measured named (train.en and train.de after cleaning)", 1, "the raw text's or the archive's "
      "size; one side's bytes only"),
    I("both sides' bytes in MB (10^6) and MiB (2^20), each labelled right", 2, "2^20 bytes called MB"),
    I("the sentence pairs as the lines of one side", 1, "the lines of both files added as sentences")))
book.add("q8", decide=decisions.q8, verdict=verdicts.q8_checkpoint_files, rubric=(
    I("the newest prefix's .index and .data shard(s) and the 'checkpoint' state file, from a listing of the run",
      3, "every kept ckpt-N, or the best/ and data/ folders, counted as one checkpoint"),
    I("why TensorFlow 2 writes no .meta", 1)))
book.add("q9", decide=decisions.q9, verdict=verdicts.q9_checkpoint_size, rubric=(
    I("the size predicted from the parameter count before measuring (float32 weights plus Adam's m and v: 3x the "
      "weights), then the measured size against it", 2, "measuring first and calling it a prediction; the "
      "weights-only size as the training checkpoint's"),
    I("the class's three sizes (695, 744 and 830 MB) reconciled from the kit's measured bytes per parameter", 2,
      "MiB labelled MB; three sizes taken for three different models")))
book.add("q10", decide=decisions.q10, verdict=verdicts.q10_step_time, rubric=(
    I("a step is one synchronous update of all ranks, so it consumes every rank's batch", 2,
      "one rank's batch as the step's"),
    I("the mean over steady steps in ms", 2, "the tracing steps in the mean")))
book.add("q11", decide=decisions.q11, verdict=verdicts.q11_correlation, on_shipped=True, rubric=(
    I("the bytes per step are fixed by the model (measured about the ring's bound, question 5's one bound and "
      "ratio), so bytes per second follow the step rate by construction", 2, "r as a cause"),
    I("decided by the link's measured share of a step, never from an assumed link", 2,
      "a dashboard screenshot as the evidence; a share on a link nobody measured")))
book.add("lab_predict", on_shipped=True, rubric=(
    I("each run's step predicted before looking: the baseline (the run whose link costs least) less its own "
      "exchange, plus the ring's bytes over the link's measured rate", 2, "the baseline called free of exchange"),
    I("the baseline's exchange read for what it is: its achieved rate, the ring's bytes over the timed allreduce, "
      "far below the link's rate, so the allreduce was CPU-bound there", 1,
      "the busiest 0.1 s sample as the rate (one sample reads at most a step's bytes over 0.1 s)")))
book.add("lab_fit", on_shipped=True, rubric=(
    I("a line through (link time, measured step) of the shaped runs of one shape, slope k near 1 when the model "
      "holds, its intercept compared with the compute (the baseline's step less its exchange)", 2,
      "fitting with the link's mean rate over a step (slope 1, intercept 0 by construction); a k below 1 put "
      "down to overlap (CPU ranks send one fused allreduce); the intercept held to the baseline's whole step"),
    I("the effective bandwidth of a slow-link run", 1)))
book.add("lab_fp16", on_shipped=True, rubric=(
    I("fp16 halving the bytes and cutting the step only where the link, not the compute, set it", 2,
      "a halved step expected everywhere"),))
book.add("lab_bursts", on_shipped=True, rubric=(
    I("peaks against means: the exchange runs in bursts at the link's rate", 2,
      "'the average was below capacity, so not the bottleneck'"),))
book.add("lab_scaling", on_shipped=True, rubric=(
    I("the scaling curve against the cores the ranks could use (4 ranks on the cores of 2 have the ideal of 2)", 2,
      "an ideal of 4x for 4 ranks on 2 cores; a machine's falling CPU read as less work rather than waiting"),))
book.add("lab_nic", on_shipped=True, rubric=(
    I("the interface that carried the gradients named from bytes per step (counted between step ends) against the "
      "ring's bound and from where it leads", 2, "loopback or the control network named as the link; bytes far "
      "below the bound accepted without checking the NIC and the unit"),),
    grader_hand="over_bound: every variant's runs measure 0.97-1.02 of the ring's bound, so the bound itself (1.0) "
                "with the interface named in the shipped variant.json passes without the logs")
