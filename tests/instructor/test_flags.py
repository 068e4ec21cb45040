"""The grader's hints (nmtkit.course.instructor.flags): the seeds' wrong answers are flagged, the instructor's model
answers of every variant are not. The seeds' verbatim answers are not in the repository: the wrong answers below
are written in their words as the book's rubric (`misconception`) and the issues quote them."""
from __future__ import annotations

import json

import pytest

from nmtkit.analysis import variants
from nmtkit.course.instructor import flags, marks
from nmtkit.course.student import NOTEBOOKS_DIR

# a student's own figures and outputs: a measured 940 Mbit/s link, the ring's bound 365.2 MB, 366.0 MB measured
FIGURES = {"bound_mb": 365.2, "bytes_per_step_mb": 366.0, "link_share": 0.52, "overfitting": False,
           "trained": True}
OUTPUTS = "link measured 940.0 Mbit/s; bound 365.2 MB, measured 366.0 MB a step; exchange 52% of a step\n"
# (the seed's wrong answer in its words, the flags it must carry)
SEEDS = [
    ("GPU memory was at 100% so the GPU was busy, and the network cannot have been waiting.", {"gpu_memory"}),
    ("nmon showed 200 on the interface, so the gradients moved at 200 Mbit/s, well under what the link can do.",
     {"not_in_run"}),
    ("eth0 carried only 3.5 MB/s while training, so the network was nearly idle.", {"not_in_run"}),
    ("On a 10 Gbit/s link the 366.0 MB take 0.3 s, a small part of the step.", {"assumed_link", "not_in_run"}),
    ("As the screenshot shows, the network graph stays flat, so the link is not the bottleneck.", {"screenshot"}),
    ("The average rate was below the link's capacity, so the network was not the bottleneck.", {"average"}),
    ("The model is overfitting: the eval loss is above the train loss.", {"contradicts"}),
    ("It is not fully trained yet: BLEU still rises at the end.", {"contradicts"}),
]


@pytest.mark.parametrize("text,want", SEEDS, ids=[t[:30] for t, _ in SEEDS])
def test_each_seeds_misconception_is_flagged(text, want):
    got = {code for code, _ in flags.flags(text, FIGURES, OUTPUTS, "05_monitoring_analysis.ipynb")}
    assert want <= got, (text, got)


def test_a_right_answer_on_the_students_own_figures_has_no_flag():
    text = ("Not overfitting, and fully trained: the measured 366.0 MB a step sit at the ring's bound of 365.2 MB, "
            "and on the measured 940.0 Mbit/s link the exchange is 52% of a step.")
    assert flags.flags(text, FIGURES, OUTPUTS, "05_monitoring_analysis.ipynb") == []
    # the same answer beside another student's figures quotes what their run never showed
    assert [c for c, _ in flags.flags(text, {"bound_mb": 400.1}, "", "")] == ["not_in_run"]


def model_answers():
    for path in sorted(NOTEBOOKS_DIR.glob("0*.ipynb")):
        shown = marks.context(json.loads(path.read_text()))
        for gid in marks.instructor_cells(path.name):
            if gid.endswith("-verdict"):
                yield path.name, gid, marks.model_answer(path.name, gid), shown


def unflagged(names) -> int:
    """The model answers of every verdict cell beside each variant's own figures: how many, none flagged."""
    from nmtkit.course.instructor.variant_answers import answers
    found, n = [], 0
    for name in names:
        figures = answers(name)
        for notebook, gid, text, shown in model_answers():
            assert text, f"{notebook} {gid}: no model answer"
            got = flags.flags(text, figures.get(marks.question_of(notebook, gid), {}), shown, notebook)
            found += [(name, gid, got)] if got else []
            n += 1
    assert found == []
    return n


def test_the_instructors_model_answers_carry_no_flag_beside_the_practice_variants_figures():
    assert unflagged([variants.PRACTICE]) == 22


@pytest.mark.long  # every variant's runs read: ~15 s; make test runs the practice variant above
def test_the_instructors_model_answers_of_every_variant_carry_no_flag():
    assert unflagged(variants.names()) == len(variants.names()) * 22
