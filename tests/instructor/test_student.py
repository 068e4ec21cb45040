"""Student copies (`make student`): solutions replaced by `raise NotImplementedError`, outputs cleared, the rest
kept."""
import re

import nbformat
import pytest

from nmtkit import cli
from nmtkit.course.student import strip_solutions, write_student_copies
from nmtkit.errors import CourseError

INTRO = "import pandas as pd\nframe = pd.DataFrame({'step': [1, 2], 'loss': [3.0, 2.5]})\nframe"
EXERCISE = """def lr(step, d_model=512, warmup=8000):
    \"\"\"The learning rate at `step`.\"\"\"
    ### BEGIN SOLUTION
    secret_formula = 2.0 * d_model ** -0.5
    return secret_formula * min(step ** -0.5, step * warmup ** -1.5)
    ### END SOLUTION

answer = None
### BEGIN SOLUTION
answer = frame.loss.min()
### END SOLUTION"""
CHECK = "check('lr', lr(8000), 0.000698)"


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Exercises"),
                nbformat.v4.new_code_cell(INTRO, execution_count=1, outputs=[
                    nbformat.v4.new_output("execute_result", {"text/plain": "   step  loss"}, execution_count=1)]),
                nbformat.v4.new_code_cell(EXERCISE, execution_count=2, outputs=[
                    nbformat.v4.new_output("stream", name="stdout", text="secret_formula printed\n")]),
                nbformat.v4.new_markdown_cell("Why?\n### BEGIN SOLUTION\nBecause secret_reason.\n### END SOLUTION"),
                nbformat.v4.new_code_cell(CHECK)]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                           "version_minor": 0}}
    nbformat.write(nb, path)
    return nb


def test_student_copy_removes_solutions_and_keeps_the_rest(tmp_path):
    src, out = tmp_path / "src", tmp_path / "student"
    src.mkdir()
    original = _notebook(src / "02_exercise.ipynb")
    [(path, replaced)] = write_student_copies(out, src)
    assert path == out / "02_exercise.ipynb" and replaced == 3
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    text = path.read_text()
    assert "secret_formula" not in text and "frame.loss.min" not in text and "secret_reason" not in text
    assert "SOLUTION" not in text
    code = nb.cells[2].source
    # the stub keeps the indentation of its BEGIN marker: inside the function, and at top level
    assert code.splitlines() == ['def lr(step, d_model=512, warmup=8000):', '    """The learning rate at `step`."""',
                                 "    raise NotImplementedError", "", "answer = None", "raise NotImplementedError"]
    compile(code, "exercise", "exec")  # still valid Python
    assert nb.cells[3].source == "Why?\nYOUR ANSWER HERE"
    # cells before the first exercise, and the check cell after it, are unchanged (outputs cleared)
    assert [c.source for c in nb.cells[:2]] == [c.source for c in original.cells[:2]]
    assert nb.cells[4].source == CHECK
    assert all(c.outputs == [] and c.execution_count is None for c in nb.cells if c.cell_type == "code")
    assert "widgets" not in nb.metadata


def test_student_copy_runs_up_to_the_exercise(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "02_exercise.ipynb")
    [(path, _)] = write_student_copies(tmp_path / "student", src)
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    scope = {}
    exec(cells[0], scope)                      # the set-up cell runs
    with pytest.raises(NotImplementedError):   # the exercise stops the student until it is filled in
        exec(cells[1], scope)
    with pytest.raises(NotImplementedError):   # and so does the function it asks for
        scope["lr"](1)


@pytest.mark.parametrize("source, message", [
    ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n### END SOLUTION\n", "without a ### BEGIN SOLUTION"),
    ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside the solution opened on line 1"),
])
def test_unbalanced_markers_name_the_cell_and_line(source, message):
    with pytest.raises(CourseError, match=message) as e:
        strip_solutions(source, where="04_x.ipynb, cell 7")
    assert "04_x.ipynb, cell 7, line" in str(e.value)


def test_student_refuses_to_overwrite_the_instructor_notebooks(tmp_path):
    _notebook(tmp_path / "02_exercise.ipynb")
    with pytest.raises(CourseError, match="overwrite"):
        write_student_copies(tmp_path, tmp_path)


def test_cli_student_writes_copies(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "02_exercise.ipynb")
    assert cli.main(["student", "--notebooks", str(src), "--out", str(tmp_path / "out")]) == 0
    assert "3 solution(s) replaced" in capsys.readouterr().out
    assert "secret_formula" not in (tmp_path / "out" / "02_exercise.ipynb").read_text()


def test_cli_student_names_a_missing_notebook_dir(tmp_path, capsys):
    assert cli.main(["student", "--notebooks", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "no notebooks" in capsys.readouterr().err


# --- the exercise convention (nbgrader metadata) and what student copies of the course leave out --------------

def test_student_copies_of_the_course_carry_no_verdicts_and_an_answer_cell_per_question(tmp_path):
    from nmtkit.course.student import NOTEBOOKS_DIR, exercises, is_instructor, role
    written = dict(write_student_copies(tmp_path, NOTEBOOKS_DIR))
    for path in written:
        text = path.read_text()
        assert "show_answer" not in text and ".verdict(" not in text, path.name
        assert not any(is_instructor(c) for c in nbformat.read(path, as_version=4).cells)
    for name, want, said in (("04_bottleneck_lab", [f"lab{i}" for i in range(1, 7)], ['"lab"']),
                             ("05_monitoring_analysis", [f"q{i}" for i in range(1, 12)],
                              [str(i) for i in range(1, 12)])):
        nb = nbformat.read(tmp_path / f"{name}.ipynb", as_version=4)
        ex = exercises(nb)
        assert sorted(ex) == sorted(want), name
        for q, cells in ex.items():
            verdict, check = nb.cells[cells["verdict"]], nb.cells[cells["check"]]
            lab = q.startswith("lab")  # the bottleneck lab's parts: checked on the lab's table
            prompt = "your answer" if lab else "your verdict, and the figure that decides it"
            assert "YOUR ANSWER HERE" in verdict.source and prompt in verdict.source
            # the lab's parts on a lab table (lab6, the reference run's interfaces: its one-row table); Q6 on the
            # shipped warm-up ablation, not the runs
            analysis = "abl" if q == "q6" else "rep"
            assert re.search(r'nk\.check\((lab|ref), "lab_' if lab else f'nk\\.check\\({analysis}, "{q}"',
                             check.source)
            assert check.metadata["nbgrader"]["locked"]
            assert cells["work"] < cells["check"] < cells["verdict"]
            assert nb.cells[cells["work"]].source.rstrip().endswith("raise NotImplementedError")
        # the instructor's copy holds the kit's verdict after each question, which the student copy drops
        ins = nbformat.read(NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4)
        verdicts = [c.source for c in ins.cells if is_instructor(c)]
        assert [re.search(r"\.verdict\((\d+|\"lab\")", v).group(1) for v in verdicts if "verdict(" in v] == said
        assert all(role(c) is None for c in ins.cells if is_instructor(c))


def test_hidden_tests_never_reach_a_student_copy():
    from nmtkit.course.student import nbgrader_metadata, student_notebook
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1\n### BEGIN SOLUTION\nx = 2\n### END SOLUTION",
                                          metadata=nbgrader_metadata("09", "q1", "work")),
                nbformat.v4.new_code_cell("assert x > 0\n### BEGIN HIDDEN TESTS\nassert x == 2\n### END HIDDEN TESTS",
                                          metadata=nbgrader_metadata("09", "q1", "check", 1)),
                nbformat.v4.new_markdown_cell("Why?\n### BEGIN SOLUTION\nsecret\n### END SOLUTION",
                                              metadata=nbgrader_metadata("09", "q1", "verdict", 1))]
    copy_, _ = student_notebook(nb)
    assert copy_.cells[1].source == "assert x > 0" and "secret" not in copy_.cells[2].source


@pytest.mark.parametrize("broken, message", [
    ("drop-check", "lacks its check cell"),
    ("unlocked-check", "wrong cell type or nbgrader flags \\['locked'\\]"),
    ("twice", "repeats cell"),
])
def test_the_convention_is_enforced_before_a_student_sees_it(broken, message):
    from nmtkit.course.student import nbgrader_metadata, student_notebook
    work = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 2\n### END SOLUTION",
                                     metadata=nbgrader_metadata("09", "q1", "work"))
    check = nbformat.v4.new_code_cell("check(x)", metadata=nbgrader_metadata("09", "q1", "check", 1))
    verdict = nbformat.v4.new_markdown_cell("### BEGIN SOLUTION\nok\n### END SOLUTION",
                                            metadata=nbgrader_metadata("09", "q1", "verdict", 1))
    nb = nbformat.v4.new_notebook()
    nb.cells = {"drop-check": [work, verdict], "unlocked-check": [work, check, verdict],
                "twice": [work, work, check, verdict]}[broken]
    if broken == "unlocked-check":
        check.metadata["nbgrader"]["locked"] = False
    with pytest.raises(CourseError, match=message):
        student_notebook(nb, "09_x.ipynb")


# --- student copies never overwrite work ---------------------------------------------------------------------

def _tree(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_student_out_refuses_a_directory_it_did_not_make_and_changes_nothing(tmp_path, capsys):
    src, mine = tmp_path / "src", tmp_path / "mine"
    src.mkdir(), mine.mkdir()
    _notebook(src / "02_exercise.ipynb")
    _notebook(mine / "02_exercise.ipynb")      # e.g. a copy of the instructor's notebooks, or a student's work
    before = _tree(mine)
    assert cli.main(["student", "--notebooks", str(src), "--out", str(mine)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a directory `nmtkit student` made" in err[0] and "--force" in err[0]
    assert _tree(mine) == before


def test_student_rerun_replaces_untouched_copies_and_refuses_edited_ones(tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "student"
    src.mkdir()
    _notebook(src / "02_exercise.ipynb")
    write_student_copies(out, src)
    write_student_copies(out, src)             # untouched copies: a re-run simply writes them again
    work = out / "02_exercise.ipynb"
    work.write_text(work.read_text().replace("raise NotImplementedError", "x = 42  # my answer"))
    before = _tree(out)
    assert cli.main(["student", "--notebooks", str(src), "--out", str(out)]) == 1
    assert "changed since" in capsys.readouterr().err
    assert _tree(out) == before                # the student's answer survives
    # --force keeps it too: moved aside, never deleted
    assert cli.main(["student", "--notebooks", str(src), "--out", str(out), "--force"]) == 0
    [aside] = list(out.glob("replaced-*/02_exercise.ipynb"))
    assert "x = 42  # my answer" in aside.read_text()
    assert "x = 42" not in work.read_text()


def test_student_out_over_a_file_names_it(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    _notebook(src / "02_exercise.ipynb")
    (tmp_path / "afile").write_text("keep")
    assert cli.main(["student", "--notebooks", str(src), "--out", str(tmp_path / "afile")]) == 1
    assert "a file where" in capsys.readouterr().err
    assert (tmp_path / "afile").read_text() == "keep"
