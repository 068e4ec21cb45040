"""The course runner: notebooks in order, a failure names the notebook and cell, the last line points to the report."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from nmtkit.course import runner as course
from nmtkit.errors import CourseError


def _write(path, *sources):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "nmtkit", "display_name": "Python 3 (nmtkit)", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def books(tmp_path):
    d = tmp_path / "notebooks"
    d.mkdir()
    _write(d / "01_first.ipynb", "import os, pathlib\nws = pathlib.Path(os.environ['NMTKIT_WORKDIR'])",
           "(ws / 'step1').write_text(os.environ['NMTKIT_PROFILE'])")
    _write(d / "02_second.ipynb", "import os, pathlib\nws = pathlib.Path(os.environ['NMTKIT_WORKDIR'])",
           "assert (ws / 'step1').exists()  # 01 ran first, in the same workspace\n"
           "(ws / 'runs' / 'report').mkdir(parents=True)\n"
           "(ws / 'runs' / 'report' / 'report.md').write_text('# report')",
           "# NBVAL_SKIP\nraise RuntimeError('a cell graders skip (it would start a server) ran')")
    (d / "notes.ipynb").write_text("not a course notebook: no NN_ prefix, never run")
    return d


def test_course_runs_notebooks_in_order_and_points_to_the_report(books, tmp_path, capfd, monkeypatch):
    monkeypatch.delenv("NMTKIT_PROFILE", raising=False)
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=books) == 0
    captured = capfd.readouterr()  # file descriptors: a kernel writing to the terminal would show here
    lines = captured.out.strip().splitlines()
    assert captured.err == ""
    assert len(lines) == 6, lines  # header, one line per notebook, "done", the checked cells, the report
    assert lines[-2] == "course: every NBVAL_CHECK_OUTPUT cell matches the committed notebooks"
    assert lines[1].startswith("[1/2] 01_first") and lines[1].endswith(")")
    assert lines[2].startswith("[2/2] 02_second")
    assert lines[-1].startswith("report:") and lines[-1].endswith("report.md")
    assert (out / "step1").read_text() == "tiny"
    executed = nbformat.read(out / "02_second.ipynb", as_version=4)
    assert all(c.get("execution_count") for c in executed.cells[:2])
    assert not executed.cells[2].get("outputs") and "tags" not in executed.cells[2].metadata  # skipped, copy clean


def test_a_failing_cell_is_named_and_the_executed_copy_kept(books, tmp_path, capsys):
    _write(books / "02_second.ipynb", "x = 1", "# a comment first\nraise ValueError('vocabulary mismatch')")
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=books) == 1
    err = capsys.readouterr().err
    assert "02_second.ipynb: cell 1" in err and "raise ValueError" in err and "vocabulary mismatch" in err
    assert (out / "02_second.ipynb").exists()


def test_no_notebooks_is_a_clear_error(tmp_path):
    with pytest.raises(CourseError, match="no notebooks"):
        course.notebooks(tmp_path)


def test_publish_copies_outputs_without_timestamps(books, tmp_path):
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=books, publish_outputs=True) == 0
    nb = nbformat.read(books / "01_first.ipynb", as_version=4)
    assert nb.cells[0].get("execution_count") == 1  # the committed copy now carries the outputs
    assert all("execution" not in c.metadata for c in nb.cells)


def test_check_outputs_compares_checked_cells_after_sanitizing(tmp_path):
    from nbformat.v4 import new_output
    committed, executed = tmp_path / "notebooks", tmp_path / "run"
    committed.mkdir()
    executed.mkdir()
    (committed / "sanitize.cfg").write_text("[timings]\nregex: \\d+(\\.\\d+)? s\\b\nreplace: TIME\n")

    def book(directory, stats, timing, free):
        cells = [new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(stats)", outputs=[new_output("stream", text=stats)]),
                 new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(t)", outputs=[new_output("stream", text=timing)]),
                 new_code_cell("print(free)", outputs=[new_output("stream", text=free)])]
        nbformat.write(new_notebook(cells=cells), directory / "01_data.ipynb")

    book(committed, "50,000 lines\n", "took 3.2 s\n", "anything\n")
    book(executed, "50,000 lines\n", "took 4.7 s\n", "something else\n")
    assert course.check_outputs(executed, committed) == []
    book(executed, "49,999 lines\n", "took 4.7 s\n", "anything\n")
    assert course.check_outputs(executed, committed) == [
        "01_data.ipynb: cell 0: output differs from the committed notebook"]
    cleared = nbformat.read(committed / "01_data.ipynb", as_version=4)
    for cell in cleared.cells:
        cell.outputs = []  # a student's copy: nothing to compare with
    nbformat.write(cleared, committed / "01_data.ipynb")
    assert course.check_outputs(executed, committed) == []


def test_the_notebooks_share_one_kernel_and_each_starts_from_an_empty_namespace(tmp_path):
    d = tmp_path / "notebooks"
    d.mkdir()
    _write(d / "01_a.ipynb", "import os, pathlib, json\nleft_over = 1\n"
           "pathlib.Path(os.environ['NMTKIT_WORKDIR'], 'pid').write_text(str(os.getpid()))")
    _write(d / "02_b.ipynb", "import os, pathlib, sys\nws = pathlib.Path(os.environ['NMTKIT_WORKDIR'])\n"
           "assert 'left_over' not in globals() and 'json' not in globals(), 'the namespace was not cleared'\n"
           "assert 'json' in sys.modules  # the modules stay imported: what sharing the kernel saves\n"
           "assert (ws / 'pid').read_text() == str(os.getpid()), 'a second kernel was started'\n"
           "(ws / 'runs' / 'report').mkdir(parents=True)\n"
           "(ws / 'runs' / 'report' / 'report.md').write_text('# report')")
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=d) == 0
    pid = int((out / "pid").read_text())
    assert not _alive(pid), "the shared kernel outlived the course"
    assert (out / "course.kernel.log").exists()


def _alive(pid: int) -> bool:
    import psutil
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_unanswered_exercises_are_listed_and_only_what_needs_them_is_skipped(books, tmp_path, capsys):
    nb = new_notebook(cells=[nbformat.v4.new_markdown_cell("## 1.7 Exercise: which file?"),
                             new_code_cell("# Exercise\nraise NotImplementedError"),
                             new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(biggest_mb)"),
                             new_code_cell("import os, pathlib\n"
                                           "ws = pathlib.Path(os.environ['NMTKIT_WORKDIR'])\n"
                                           "(ws / 'after').write_text('ran'); (ws / 'step1').write_text('')")])
    nb.metadata["kernelspec"] = {"name": "nmtkit", "display_name": "Python 3 (nmtkit)", "language": "python"}
    nbformat.write(nb, books / "01_first.ipynb")
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=books) == 0
    text = capsys.readouterr().out
    assert "1 unanswered, 1 cells after them skipped" in text
    assert ("course: 1 exercises are still unanswered (each raises NotImplementedError; the cells that need its "
            "answer were skipped):\n  01_first: 1.7 Exercise: which file?\n") in text
    assert (out / "after").read_text() == "ran"  # a cell not downstream of the exercise ran
    executed = nbformat.read(out / "01_first.ipynb", as_version=4)
    assert executed.cells[1].outputs[0]["ename"] == "NotImplementedError" and not executed.cells[2].outputs


def test_until_first_runs_each_notebook_to_its_first_exercise_and_still_lists_every_one(books, tmp_path, capsys):
    nb = new_notebook(cells=[new_code_cell("import os, pathlib\nws = pathlib.Path(os.environ['NMTKIT_WORKDIR'])\n"
                                           "(ws / 'before').write_text('ran'); (ws / 'step1').write_text('')"),
                             nbformat.v4.new_markdown_cell("## 1.7 Exercise: which file?"),
                             new_code_cell("# Exercise\nraise NotImplementedError"),
                             new_code_cell("(ws / 'after').write_text('ran')  # needs no answer: runs in a full demo"),
                             nbformat.v4.new_markdown_cell("## 1.8 Exercise: which line?"),
                             new_code_cell("raise NotImplementedError")])
    nb.metadata["kernelspec"] = {"name": "nmtkit", "display_name": "Python 3 (nmtkit)", "language": "python"}
    nbformat.write(nb, books / "01_first.ipynb")
    out = tmp_path / "run"
    assert course.run_course(out_dir=out, directory=books, until_first=True) == 0
    text = capsys.readouterr().out
    assert "each to its first unanswered exercise" in text and "2 unanswered, 2 cells after them skipped" in text
    assert "  01_first: 1.7 Exercise: which file?\n  01_first: 1.8 Exercise: which line?\n" in text
    assert (out / "before").read_text() == "ran" and not (out / "after").exists()
    executed = nbformat.read(out / "01_first.ipynb", as_version=4)
    assert executed.cells[2].outputs[0]["ename"] == "NotImplementedError"
    assert not executed.cells[3].outputs and not executed.cells[5].outputs
    with pytest.raises(CourseError, match="drop --until-first"):
        course.run_course(out_dir=out, directory=books, until_first=True, publish_outputs=True)


def test_a_stub_failing_otherwise_is_a_failure(books, tmp_path, capsys):
    _write(books / "01_first.ipynb", "x = 1 / 0\nraise NotImplementedError")
    assert course.run_course(out_dir=tmp_path / "run", directory=books) == 1
    assert "01_first.ipynb: cell 0" in capsys.readouterr().err
