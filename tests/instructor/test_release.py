"""The student release (`nmtkit release`): built into a fresh directory and imported from there in subprocesses (no
new venv), it carries no solution, verdict, rubric or expected figure; its checks are formative and cannot be
searched; its notebook 05 runs with the instructor's solutions put in, and grades here with the hidden checks."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nmtkit.analysis import load_run, reference_run, variants
from nmtkit.analysis.lab import shipped
from nmtkit.analysis.questions import book as students_book
from nmtkit.course import expected, student
from nmtkit.course.instructor import release
from nmtkit.course.instructor.book import book, decide
from nmtkit.course.instructor.decisions import lab
from nmtkit.course.instructor.variant_answers import answers
from nmtkit.course.instructor.verdicts import NCCL_WAIT, NVML_MEANING

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

ROOT = Path(__file__).resolve().parents[2]
NB05 = "05_monitoring_analysis.ipynb"
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,_]*\.?\d*(?:[eE][-+]?\d+)?")
# the reference run's own logs, as the run wrote them (they hold its measurements, as a student's run would)
RUN_LOGS = re.compile(r"nmtkit/reference/(?:variant-[^/]+/)?[^/]+/(?:ranks/|monitor/|translations/|scalars\.jsonl"
                      r"|run\.json|config\.json|data_stats\.json|checkpoints/)")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    return release.build(tmp_path_factory.mktemp("release") / "kit")


@pytest.fixture(scope="module")
def figures():
    """(question, name, value) of every figure the grader's decisions accept on the reference run. Ratios near 1
    (bytes measured over the ring's bound) are left out: any ratio of two like quantities prints as 1.00."""
    d = decide(load_run(reference_run()))
    d.update({q: v for q, v in lab(shipped()).items() if q.startswith("lab_")})  # the bottleneck lab's figures
    found = [(q, k, v, False) for q, vals in d.items() if q != "missing" for k, v in vals.items()]
    # and every graded variant's answers: they never leave the instructor's kit
    found += [(q, k, v, True) for name in variants.graded() for q, vals in answers(name).items()
              for k, v in vals.items()]
    return [(q, k, v, graded) for q, k, v, graded in found
            if q in students_book and k in students_book[q].targets and isinstance(v, float) and v
            and not 0.95 < v < 1.05]


# where a graded variant's answer could leak from (not its runs' own records, which ship by design, nor bench's
# dated figures of other measurements): 200 more figures meet those files' numbers by chance at 3-4 digits
VARIANT_RUN = re.compile(r"nmtkit/reference/variant-[^/]+/[^/]+/|bench/")


def printed(v: float, text: str, least: int = 3) -> list[str]:
    """The numbers in `text` that are `v` printed to `least` or more significant digits (4 for a whole number:
    three digits alone, such as 958 Mbit/s, meet too many unrelated figures)."""
    hits = []
    for m in NUMBER.finditer(text):
        tok = m.group(0).replace(",", "").replace("_", "")
        digits = len(re.sub(r"\D", "", re.split(r"[eE]", tok)[0]).lstrip("0"))
        if not re.search(r"[.eE]", tok):
            digits = digits if digits >= 4 else 0
        try:
            x = float(tok)
        except ValueError:
            continue
        if digits >= least and x and (float(f"{v:.{digits}g}") == x or float(f"{v:.{digits - 1}e}") == x):
            hits.append(tok)
    return hits


def in_release(kit: Path, code: str, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(kit), "TF_USE_LEGACY_KERAS": "1"}
    return subprocess.run([sys.executable, "-c", code, str(kit), *args], cwd=kit, env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_files(kit: Path, name: str) -> list[Path]:
    """`name` in every shipped run of the release: nmtkit/reference/<run>/ and a graded variant's
    nmtkit/reference/variant-<k>/<run>/."""
    ref = kit / "nmtkit" / "reference"
    return sorted([*ref.glob(f"*/{name}"), *ref.glob(f"variant-*/*/{name}")])


def texts(root: Path):
    for p in sorted(root.rglob("*")):
        # the practice variant's expected figures ship by design: there a student's checks say right or wrong
        if p.is_file() and not RUN_LOGS.search(p.relative_to(root).as_posix()) and p.name != expected.NAME:
            try:
                yield p.relative_to(root).as_posix(), p.read_text()
            except UnicodeDecodeError:
                continue


def test_the_release_holds_no_solution_verdict_rubric_or_expected_figure(kit, figures):
    names = {p.name for p in (kit / "nmtkit" / "course").glob("*.py")}
    assert not names & {f"{m}.py" for m in release.INSTRUCTOR_MODULES}, names
    assert {"exercises.py", "student.py"} <= names
    # the instructor's registry of questions goes whole, with its folder; the students' records stay
    assert not (kit / "nmtkit" / "course" / "instructor").exists() and "book" in release.INSTRUCTOR_MODULES
    assert (kit / "nmtkit" / "question.py").is_file()
    assert not (kit / "docs" / "instructors.md").exists() and not (kit / "tools").exists()
    # the one list of what the release leaves out (release.LEFT_OUT): none of it is in the release, all of it is here
    assert {"nmtkit/course/instructor/", "tests/instructor/", "docs/instructors.md", "docs/rehearsal.md",
            "tools/"} <= set(release.LEFT_OUT)
    for rel in release.LEFT_OUT:
        assert (ROOT / rel).exists() and not (kit / rel).exists(), rel
    # the GPU-shaped switch (a sitecustomize that fakes TensorFlow's GPUs) never reaches a student's release or image
    assert (ROOT / "tests" / "gpushape" / "sitecustomize.py").is_file() and not (kit / "tests" / "gpushape").exists()
    assert not [p for p in kit.rglob("*.py") if p.name in ("sitecustomize.py", "usercustomize.py")
                or "NMTKIT_TEST_GPU_SHAPED" in p.read_text()]
    # a shipped test that names the instructor's kit skips without it (INSTRUCTOR_KIT): tests/heavy builds a release
    assert not [t for t in (kit / "tests").rglob("*.py") if re.search(r"nmtkit\.course\.instructor|tools\.rehearsal|"
                                                                      r"\"grade\"|nmtkit grade", t.read_text())
                and "if not INSTRUCTOR_KIT" not in t.read_text()]
    instructor = student.read_notebook(ROOT / "notebooks" / NB05)
    model_answers = [line.strip() for c in instructor.cells if (student.role(c) or ("", "", ""))[2] == "verdict"
                     for line in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", c.source, re.S)[0].split("\n")
                     if len(line.strip()) > 40]
    assert len(model_answers) > 11
    forbidden = ["### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS", NVML_MEANING[:60], NCCL_WAIT[:60],
                 *(i.text[:60] for m in book.values() for i in m.rubric), *model_answers]
    leaks = []
    for rel, text in texts(kit):
        leaks += [(rel, f[:40]) for f in forbidden if f in text]
        least = 4 if rel.startswith("bench/") else 3  # bench's speed ratios (1.27x) meet 3-digit figures by chance
        leaks += [(rel, q, k, hit) for q, k, v, graded in figures if not (graded and VARIANT_RUN.match(rel))
                  for hit in printed(v, text, max(least, 4) if graded else least)]
    assert not leaks, leaks[:10]
    for m in run_files(kit, "manifest.json"):  # the reference run, the lab's, and every graded variant's
        manifest = json.loads(m.read_text())
        assert "checks" not in manifest and "bytes_per_step_by_counters" not in manifest and manifest["command"], m
    assert len(list((kit / "nmtkit" / "reference").glob("lab-*/manifest.json"))) >= 5
    nb = nbformat.read(kit / "notebooks" / NB05, 4)
    assert not any(c.get("outputs") for c in nb.cells) and not any(student.is_instructor(c) for c in nb.cells)


IMPORTS = r"""
import importlib.util, json, sys
import nmtkit
from nmtkit.notebook import Analysis
from nmtkit.course import exercises
from nmtkit import cli
rcs = {}
for args in (["report", "--run", sys.argv[2], "--instructor"], ["grade", "--submission", "."]):
    try:
        rcs[args[0]] = cli.main(args)
    except SystemExit as e:
        rcs[args[0]] = e.code
rcs["plain"] = cli.main(["report", "--run", sys.argv[2], "--out", sys.argv[3]])
print(json.dumps({"file": nmtkit.__file__, "verdict": hasattr(Analysis, "verdict"), "rcs": rcs,
                  "modules": [m for m in ("decisions", "hidden", "judgments", "verdicts", "rubric", "grade")
                              if importlib.util.find_spec("nmtkit.course." + m)],
                  "decide": [n for n in ("decide", "_expected", "expected", "graded") if hasattr(exercises, n)]}))
"""


def test_the_release_imports_alone_without_verdicts_and_its_report_holds_measurements_only(kit, figures, tmp_path):
    out = in_release(kit, IMPORTS, str(reference_run()), str(tmp_path / "rep"))
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(kit)), got
    assert got["verdict"] is False and got["modules"] == [] and got["decide"] == [], got
    assert got["rcs"]["report"] == 2 and got["rcs"]["grade"] == 2 and got["rcs"]["plain"] == 0, got
    report = (tmp_path / "rep" / "report.md").read_text()
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", report, re.S)]
    assert len(blocks) >= 8
    bad = []

    def walk(o, key=""):
        if isinstance(o, bool) or key in ("verdict", "bottleneck", "fully_trained"):
            bad.append((key, o))
        elif isinstance(o, dict):
            [walk(v, k) for k, v in o.items()]
        elif isinstance(o, list):
            [walk(v, key) for v in o]
        elif isinstance(o, float):
            bad.extend((key, o, q, k) for q, k, v, graded in figures if not graded and abs(o - v) <= 1e-4 * abs(v))
    for b in blocks:
        walk(b)
    assert not bad, bad


FORMATIVE = r"""
import json, sys
import nmtkit as nk
from nmtkit.errors import ExerciseError
rep = nk.analyse([], sys.argv[1] + "/report", reference=True)
want = json.loads(sys.argv[2])
def reply(**figures):
    try:
        nk.check(rep, "q4", run=rep.reference, **figures)
        return "printed"
    except ExerciseError as e:
        return str(e)
out = {}
for f in (0.5, 0.98, 0.999, 1.0, 1.001, 1.02, 2.0):
    import io, contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = reply(**{k: v * f for k, v in want.items()})
    out[str(f)] = r + buf.getvalue()
out["percent"] = reply(**{**want, "mfu": want["mfu"] * 100})
print(json.dumps(out))
"""


def test_the_releases_check_is_formative_and_cannot_be_bisected(kit, monkeypatch):
    """Under a graded variant (the practice one's checks say right or wrong: the test above)."""
    name = variants.graded()[0]
    monkeypatch.setenv(variants.ENV_VARIANT, name)
    want = answers(name)["q4"]
    out = in_release(kit, FORMATIVE, json.dumps(want))
    assert out.returncode == 0, out.stderr[-2000:]
    replies = json.loads(out.stdout.strip().splitlines()[-1])
    scaled = {k: v for k, v in replies.items() if k != "percent"}
    assert len(set(scaled.values())) == 1, scaled  # below, at and above the accepted value: one reply
    assert "right form" in replies["1.0"] and "too" not in replies["1.0"]
    lo, hi = 0.5, 2.0  # a bisection that only has the replies learns nothing: both ends answer alike
    assert replies[str(lo)] == replies[str(hi)]
    assert "fraction" in replies["percent"] and "too" not in replies["percent"]


def test_notebook_04_of_the_release_runs_with_the_solutions_and_grades_here(kit, figures, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    from nmtkit.course.instructor.container import Sandbox
    from nmtkit.course.instructor.grade import grade
    instructor = student.read_notebook(ROOT / "notebooks" / NB05)
    answers = {student.grade_id(c): c.source for c in instructor.cells
               if (student.role(c) or ("", "", ""))[2] != "check" and student.grade_id(c)}
    nb = nbformat.read(kit / "notebooks" / NB05, 4)
    for c in nb.cells:
        if student.grade_id(c) in answers:
            c.source = answers[student.grade_id(c)]
    sub = tmp_path / "submission"
    sub.mkdir()
    nbformat.write(nb, sub / NB05)
    ws = tmp_path / "ws"
    shutil.copytree(reference_run(), ws / "runs" / "horovod")
    env = {**os.environ, "PYTHONPATH": str(kit), "NMTKIT_WORKDIR": str(ws), "TF_USE_LEGACY_KERAS": "1"}
    run_nb = nbformat.read(sub / NB05, 4)
    NotebookClient(run_nb, timeout=300, kernel_name=student.kernel_name(run_nb),
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)
    # every output the kit printed; the recap and the work cells show the student's own figures back to them
    shown = "\n".join(o.get("text", "") + json.dumps(o.get("data", {}).get("text/plain", ""))
                      + json.dumps(o.get("data", {}).get("text/html", ""))
                      for c in run_nb.cells if c.cell_type == "code" and "recap" not in c.metadata.get("tags", [])
                      and (student.role(c) or ("", "", ""))[2] != "work" for o in c.outputs)
    recap = next(c for c in run_nb.cells if "recap" in c.metadata.get("tags", []))
    recap_text = json.dumps(recap.outputs)
    assert "(not computed)" not in recap_text and "flops_per_step" in recap_text and "link_share" in recap_text
    assert "right form" in shown and "agree with the logs" not in shown  # the release's checks ran
    assert not [(q, k, hit) for q, k, v, graded in figures if not graded for hit in printed(v, shown)]
    import tempfile
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    graded = grade(sub, only=["04", "05"], sandbox=Sandbox(trusted=True))[0]
    assert not list(scratch.iterdir())  # grading leaves nothing behind in the temp directory
    failed = [c for c in graded["cells"] if c["status"] == "failed"]
    assert graded["points"] == graded["max_points"] > 0 and not failed, failed


def test_q4_fails_with_every_weight_on_both_sides_and_passes_per_side(tmp_path):
    from nmtkit.course.exercises import check
    from nmtkit.errors import ExerciseError
    from nmtkit.notebook import analyse
    rep = analyse([], tmp_path, reference=True)
    ref = rep.reference
    st = ref.ranks[ref.ranks.groupby("rank").cumcount() >= 3]
    peak, step_s = ref.status["summary"]["peak_flops"], st.step_time.mean()
    wrong = 6 * ref.status["params"] * st.tokens.mean()
    with pytest.raises(ExerciseError, match="flops_per_step: too high"):
        check(rep, "q4", run=ref, flops_per_step=wrong, tokens_per_s=st.tokens.mean() / step_s,
              mfu=wrong / step_s / peak)
    m, vocab = ref.config.model, ref.status["summary"]["vocab_size"]
    d, f = m.d_model, m.d_ff
    fwd = 2 * (m.encoder_layers * (4 * d * d + 2 * d * f) * st.src_tokens
               + (m.decoder_layers * (8 * d * d + 2 * d * f) + vocab * d) * st.tgt_tokens)
    fwd += 4 * d * (m.encoder_layers * st.src_tokens * st.src_len
                    + m.decoder_layers * st.tgt_tokens * (st.tgt_len + st.src_len))
    flops = (3 * fwd).mean()
    check(rep, "q4", run=ref, flops_per_step=flops, tokens_per_s=st.tokens.mean() / step_s, mfu=flops / step_s / peak)
    # the graded MFU is train_flops over the steps run.json names, and run.json's own figure (within 1%)
    s = ref.status["summary"]
    named = ref.ranks[ref.ranks.step.between(s["mfu_first_step"], s["mfu_last_step"])]
    from nmtkit.course.instructor.mfu import steady_mfu
    assert steady_mfu(named.to_dict("records"), m, vocab, peak) == pytest.approx(flops / step_s / peak, rel=0.01)
    assert s["mfu"] == pytest.approx(flops / step_s / peak, rel=0.01)


def test_the_manifests_checksums_match_the_files_the_release_ships(kit):
    manifests = run_files(kit, "manifest.json")
    assert len(manifests) >= 10
    wrong = []
    for m in manifests:
        for rel, want in json.loads(m.read_text())["files"].items():
            data = (m.parent / rel).read_bytes()
            if (len(data), hashlib.sha256(data).hexdigest()) != (want["bytes"], want["sha256"]):
                wrong.append(f"{m.parent.name}/{rel}")
    assert not wrong, wrong


# what the release names that it lacks: the instructor's docs and tools, `nmtkit grade`, the instructor's tests
LACKS = re.compile(r"instructors\.md|rehearsal\.md|nmtkit grade|tools/rehearsal|tools\.rehearsal|tests/instructor/|"
                   r"make rehearsal|make student\b|nmtkit release")


def test_no_doc_in_the_release_names_a_file_or_command_it_lacks(kit):
    readme = (kit / "README.md").read_text()
    assert "docker run --rm -p 127.0.0.1:8888:8888 -v nmtkit-work:/home/jovyan/work" in readme
    assert "make setup" in readme and "5 GB" in readme and (kit / "Dockerfile").is_file()
    commit = (kit / "COMMIT").read_text()
    assert commit.strip() and release.kit_commit(ROOT).split("+")[0] in commit
    named = [(p.relative_to(kit).as_posix(), n, line.strip()[:100]) for p in sorted(kit.rglob("*.md"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if LACKS.search(line)]
    assert not named, named
    # every kit path a doc names (in text or code) is in the release, or one the kit makes when it runs
    path = re.compile(r"(?<![\w./-])((?:\.ci|tests|nmtkit|bench|docs|scripts|tools|notebooks|data|docker)/[\w./-]*\w)")
    made = ("data/tiny", "data/wmt16", "notebooks/workspace")
    lacking = sorted({(p.relative_to(kit).as_posix(), t) for p in kit.rglob("*.md")
                      if not p.relative_to(kit).as_posix().startswith("nmtkit/reference/")
                      for t in path.findall(p.read_text()) if not (kit / t).exists() and not t.startswith(made)})
    assert not lacking, lacking


def test_a_releases_make_test_runs_the_student_tests_and_each_names_a_test_file(kit):
    from conftest import STUDENT_TESTS
    assert [t for t in STUDENT_TESTS if not (ROOT / "tests" / t).is_file()] == []
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests", "--ignore=tests/heavy"],
                         cwd=kit, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(kit)})
    files = {line.split("::")[0].split("/")[-1] for line in out.stdout.splitlines() if "::" in line}
    assert out.returncode == 0 and files == set(STUDENT_TESTS), (sorted(files ^ set(STUDENT_TESTS)), out.stdout[-1500:])



def test_the_shipped_reference_runs_lose_their_mfu_and_nothing_else(kit):
    """Question 4's answer is the reference run's MFU: run.json's summary.mfu and the scalars' mfu tag stay with
    the instructor (a student's own runs log theirs); every other record ships as the run wrote it."""
    runs = [p.parent for p in run_files(kit, "run.json")]
    assert len(runs) >= 10
    for run in runs:
        mine = ROOT / run.relative_to(kit)
        s, ours = json.loads((run / "run.json").read_text()), json.loads((mine / "run.json").read_text())
        assert "mfu" in ours["summary"] and "mfu" not in s["summary"], run.name  # the instructor's keep it
        assert s["summary"]["peak_flops"] == ours["summary"]["peak_flops"] and s["params"] == ours["params"]
        tags = [json.loads(ln)["tag"] for ln in (run / "scalars.jsonl").read_text().splitlines() if ln.strip()]
        kept = [json.loads(ln) for ln in (mine / "scalars.jsonl").read_text().splitlines() if ln.strip()]
        assert "mfu" not in tags and tags == [r["tag"] for r in kept if r["tag"] != "mfu"], run.name
        for rel, text in ((p.relative_to(kit).as_posix(), p.read_bytes().decode("utf-8", "replace"))
                          for p in sorted(run.rglob("*")) if p.is_file()):  # no file holds it, by name or by value
            assert not re.search(r'"mfu"|\bMFU \d', text), rel
            assert not printed(ours["summary"]["mfu"], text), (rel, printed(ours["summary"]["mfu"], text))


FLOPS = ("import json, nmtkit.model.flops as f, nmtkit.training.reporter as r; print(json.dumps([n for n in "
         "('record_flops', 'steady_mfu') if hasattr(f, n) or hasattr(r, n)]))")


def test_the_release_ships_no_function_that_yields_question_4s_answer(kit):
    """record_flops/steady_mfu turn a run's rank logs into its MFU: the instructor's (course/instructor/mfu.py);
    the training loop counts its own steps (model/flops.py train_flops) for the student's own log line."""
    found = [rel for rel, text in texts(kit) if rel.endswith(".py") and re.search(r"record_flops|steady_mfu", text)]
    assert not found, found
    out = in_release(kit, FLOPS)
    assert out.returncode == 0 and json.loads(out.stdout.strip().splitlines()[-1]) == [], out.stderr[-2000:]


LINK = r"""
import json, pandas as pd, nmtkit as nk
trials = pd.DataFrame({"compression": ["none", "fp16"], "ranks": [2, 2], "interface": ["lo", "lo"], "bytes/step sent":
                       [8_476_940, 4_306_256], "step time (ms)": [53.5, 96.2]}).set_index("compression")
try:
    table = nk.link_table(trials, 0.192)
    out = {"attrs": sorted(table.attrs), "text": table.to_string() + json.dumps(table.attrs, default=str)}
except nk.NmtkitError as e:
    out = {"attrs": [], "text": str(e), "refused": True}
print(json.dumps(out))
"""
VERDICT_WORDS = re.compile(r"(?:network|compute) would set the pace|sending them takes as long|cannot show it:|"
                           r"break-even link \(Gbit/s\)")  # the verdict's words and the table's column


def test_the_releases_link_table_gives_no_verdict_and_notebook_03_does_not_call_it(kit):
    out = in_release(kit, LINK)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "verdict" not in got["attrs"] and not VERDICT_WORDS.search(got["text"]), got
    assert not (kit / "nmtkit" / "course" / "instructor").exists()
    nb03 = (kit / "notebooks" / "03_horovod_multinode.ipynb").read_text()
    assert "link_table" not in nb03 and "verdict\\\"]" not in nb03 and not VERDICT_WORDS.search(nb03)
    assert "nk.link_table(" in (ROOT / "notebooks" / "03_horovod_multinode.ipynb").read_text()  # the instructor's


# the lessons' verdicts as bench/README.md once quoted them ('"no, still rising"', "set the pace", √(100/400))
BENCH_VERDICTS = re.compile(r"still rising|set the pace|question \d+ \(\"|\"(?:no|yes)[,\"]|√\(\d")

TITLES = r"""
import json, sys
from nmtkit.analysis import figures, reference_run  # every figure the report draws, its title kept
from nmtkit.analysis.report import analyse
seen = []
figures._save = lambda fig, path: seen.extend(ax.get_title() for ax in fig.axes if ax.get_title()) or path
analyse([reference_run()], sys.argv[2])
print(json.dumps(seen))
"""


def test_no_shipped_bench_note_or_figure_title_states_an_answer(kit, tmp_path):
    bench = {p.relative_to(kit).as_posix(): p.read_text() for p in (kit / "bench").rglob("*.md")}
    hits = [(rel, m.group(0)) for rel, text in bench.items() for m in BENCH_VERDICTS.finditer(text)]
    assert "bench/README.md" in bench and not hits, hits
    assert BENCH_VERDICTS.search((ROOT / "docs" / "instructors.md").read_text())  # kept with the instructor
    out = in_release(kit, TITLES, str(tmp_path / "figs"))
    assert out.returncode == 0, out.stderr[-2000:]
    drawn = json.loads(out.stdout.strip().splitlines()[-1])  # and every title the code and notebooks write
    code = [p.read_text() for p in (kit / "nmtkit").rglob("*.py")] + ["".join(c.source) for nb in sorted(
        (kit / "notebooks").glob("*.ipynb")) for c in nbformat.read(nb, 4).cells]
    titles = drawn + [t for s in code for t in re.findall(r"(?:title=|title\(|suptitle\()\s*f?[\"']([^\"']+)", s)]
    assert "Learning rate" in drawn and len(drawn) > 12 and len(titles) > len(drawn) + 5, titles
    stated = [t for t in titles if re.search(r"sqrt|√|square root|warm-?up, then|decays? as", t, re.I)]
    assert not stated, stated


PRACTICE_CHECK = r"""
import json, sys
import nmtkit as nk
from nmtkit.course.expected import read
want, lab = read()["lab_predict"], nk.lab_runs()
for label, figures in (("right", want), ("wrong", {**want, "predicted_s": want["predicted_s"] * 1.2})):
    try:
        nk.check(lab, "lab_predict", **figures)
    except nk.NmtkitError as e:
        print(label, "RAISED", e)
"""


def test_the_practice_variants_checks_say_right_or_wrong_and_how_far_a_graded_ones_check_the_form(kit, monkeypatch):
    """Deliver 3: in the release, on the practice variant's runs, a check says right, or wrong with the distance and
    the hint; under a graded variant the same call checks the form only (no answer of it is in the release)."""
    assert (kit / "nmtkit" / "reference" / expected.NAME).is_file()
    monkeypatch.delenv(variants.ENV_VARIANT, raising=False)
    monkeypatch.delenv(variants.ENV_STUDENT, raising=False)
    out = in_release(kit, PRACTICE_CHECK)
    assert out.returncode == 0, out.stderr[-2000:]
    right, wrong = out.stdout.split("wrong RAISED")
    assert "✓ lab_predict on the practice variant: right" in right and "RAISED" not in right, out.stdout
    assert "predicted_s: +20.0% off" in wrong and "Hint:" in wrong, out.stdout
    monkeypatch.setenv(variants.ENV_VARIANT, variants.graded()[0])
    graded = in_release(kit, PRACTICE_CHECK.replace('read()["lab_predict"]',
                                                        'json.load(open(sys.argv[2]))["figures"]["lab_predict"]'),
                        str(kit / "nmtkit" / "reference" / expected.NAME))
    assert graded.returncode == 0, graded.stderr[-2000:]
    assert "have the right form" in graded.stdout and "RAISED" not in graded.stdout, graded.stdout
    released = json.loads((kit / "nmtkit" / "reference" / expected.NAME).read_text())
    assert released["variant"] == variants.PRACTICE and "lab_predict" in released["figures"]
