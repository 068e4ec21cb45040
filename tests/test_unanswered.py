"""The course runner's plan for unanswered exercises (nmtkit.course.unanswered): which cells run, which are skipped."""
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from nmtkit.course.unanswered import plan


def _cells(*sources):
    return new_notebook(cells=[new_markdown_cell(s[3:]) if s.startswith("md:") else new_code_cell(s)
                               for s in sources]).cells


def test_a_stub_is_unanswered_and_only_the_cells_needing_its_answer_are_skipped():
    cells = _cells("import numpy as np\nsizes = [1, 2]",
                   "md:## 1.7 Exercise: which file, and how big?",
                   "# Exercise\nfrom pathlib import Path\nraise NotImplementedError",
                   "nk.check(biggest_mb)",                        # reads the answer: skipped
                   "total = sum(sizes)\nprint(np.mean(sizes), Path)",  # names bound before the raise: runs
                   "doubled = biggest_mb * 2",                    # skipped, and so are its names
                   "print(doubled)",                              # needs a skipped cell's name: skipped
                   "biggest_mb = 3\nprint(biggest_mb)",           # binds it again itself: runs
                   "print(biggest_mb, total, len([x for x in sizes]))")  # bound again above: runs
    p = plan(cells)
    assert p.unanswered == {2: "1.7 Exercise: which file, and how big?"}
    assert p.skipped == [3, 5, 6]


def test_a_notebook_without_a_stub_runs_whole_even_with_undefined_names():
    # an undefined name before any unanswered exercise is a real error the run must show, never a skip
    p = plan(_cells("print(undefined_name)", "raise NotImplementedError('not a stub')\nx = 1"))
    assert p.skipped == [] and list(p.unanswered) == [1]
    assert plan(_cells("print(1)", "def f(a):\n    return a\nf(2)")).unanswered == {}


def test_a_conditional_raise_is_no_stub_and_magics_parse():
    cells = _cells("if False:\n    raise NotImplementedError", "%matplotlib inline\nx = 1",
                   "md:### Q1", "raise NotImplementedError()", "%time y = x\nprint(answer)", "!ls\nprint(x)")
    p = plan(cells)
    assert p.unanswered == {3: "Q1"} and p.skipped == [4]
