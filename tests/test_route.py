"""The straight route of `nmtkit train` (issue 52): launchers are objects behind one seam (no comparison on a
launcher's name or type outside its factory), training knows no scheduler, a one-process run never imports
nmtkit.cluster, and one owner per process kind takes and releases the run directory's lock."""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "nmtkit"
LAUNCHER_NAMES = {"local", "ssh", "manual", "slurm"}  # ("auto" is also train.precision's value)


def _ident(node: ast.AST) -> str:
    """The name an operand reads, e.g. 'self.backend.name' -> 'name', 'cc.launcher' -> 'launcher'."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def launcher_comparisons(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of every comparison on a launcher's name or type: an operand named *launcher*,
    a launcher name as a string constant, isinstance/type on a *Launcher class, or a Slurm object tested for None."""
    tree = ast.parse(source)
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

    def where(node) -> str:
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return "<module>"

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = any("launcher" in _ident(o).lower() or _ident(o).lower() == "slurm" for o in operands)
            consts = [o.value for o in operands if isinstance(o, ast.Constant) and isinstance(o.value, str)]
            consts += [e.value for o in operands if isinstance(o, (ast.Tuple, ast.List, ast.Set))
                       for e in o.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if named or LAUNCHER_NAMES & set(consts):
                found.append((node.lineno, where(node)))
        elif isinstance(node, ast.Call) and _ident(node.func) in ("isinstance", "type"):
            if any(_ident(a).endswith("Launcher") for a in ast.walk(node) if isinstance(a, (ast.Name, ast.Attribute))):
                found.append((node.lineno, where(node)))
    return found


def _modules(*globs: str) -> list[Path]:
    return sorted(p for g in globs for p in PKG.glob(g))


def test_the_detector_finds_what_the_launchers_replaced():
    """The test below could fail: the old code's forms are found."""
    old = '''
def start(self, hosts):
    if self.launcher == "local": pass
    if self.launcher != "manual": pass
    if launcher in ("ssh", "manual", "slurm"): pass
    if self.slurm is not None: pass
    if isinstance(self.backend, SlurmLauncher): pass
    if self.backend.name == "ssh": pass
'''
    assert [line for line, _ in launcher_comparisons(old)] == [3, 4, 5, 6, 7, 8]


def test_no_comparison_on_a_launchers_name_or_type_outside_the_factory():
    files = _modules("cluster/*.py", "train*/**/*.py")
    assert any(f.name == "launchers.py" for f in files) and any("training" in f.parts for f in files)
    bad = [f"{f.relative_to(ROOT)}:{line} in {fn}()" for f in files
           for line, fn in launcher_comparisons(f.read_text())
           if not (f.name == "launchers.py" and fn == "make_launcher")]
    assert not bad, "compare launchers by asking the object (cluster/launchers.py), not by name or type:\n" + \
        "\n".join(bad)


def test_training_knows_no_scheduler():
    hits = [f"{f.relative_to(ROOT)}:{i}" for f in _modules("train*/**/*.py", "train*/**/*.json")
            for i, line in enumerate(f.read_text().splitlines(), 1) if re.search(r"slurm|squeue", line, re.I)]
    assert not hits, hits
    assert "nmtkit.training" not in (PKG / "cluster" / "slurm.py").read_text()


def test_the_factory_makes_one_object_per_launcher_and_refuses_bad_choices():
    from horovod.runner.common.util.hosts import HostInfo

    from nmtkit.cluster.launchers import Launcher, LocalLauncher, ManualLauncher, SshLauncher, make_launcher
    from nmtkit.errors import ClusterError
    hosts = [HostInfo("vm1", 2), HostInfo("vm2", 2)]
    assert type(make_launcher("auto", [])) is LocalLauncher and type(make_launcher("auto", hosts)) is SshLauncher
    manual = make_launcher("manual", hosts)
    assert type(manual) is ManualLauncher and not manual.starts_engines and not manual.owns_engines
    assert manual.engine_count(9) == 4 and make_launcher("local", hosts).engine_count(3) == 3
    assert make_launcher("local", hosts).remote_hosts() == [] and make_launcher("ssh", hosts).remote_hosts() == [
        "vm1", "vm2"]
    assert all(isinstance(make_launcher(n, hosts), Launcher) for n in ("ssh", "manual", "local"))
    with pytest.raises(ClusterError, match="cluster.launcher=ssh needs cluster.hosts"):
        make_launcher("ssh", [])
    with pytest.raises(ClusterError, match="choose auto, local, ssh, manual, slurm"):
        make_launcher("pbs", [])
    with pytest.raises(ClusterError, match="Slurm picks the nodes"):  # refused before Slurm's commands are sought
        make_launcher("slurm", hosts)


def route_disagreements() -> list[str]:
    """Each --launcher choice where route.py's answer (one process, or ranks) is not its launcher class's."""
    import argparse

    from nmtkit import config, route
    from nmtkit.cluster.launchers import launcher_class
    bad = [] if set(route.ONE_PROCESS) == set(config.choices("cluster.launcher")) else [
        f"route.ONE_PROCESS names {sorted(route.ONE_PROCESS)}, the choices are {config.choices('cluster.launcher')}"]
    for name in config.choices("cluster.launcher"):
        cls = launcher_class(name, [])
        alone = not route.needs_ranks(argparse.Namespace(np=1, hosts="", launcher=name))
        if alone != cls.one_process:
            bad.append(f"--launcher {name}: route says one process={alone}, "
                       f"{cls.__name__}.one_process={cls.one_process}")
    return bad


def test_the_route_and_each_launcher_class_agree_on_a_one_process_run(monkeypatch):
    """route.py decides before importing nmtkit.cluster, from a table; the answer is each launcher class's own."""
    from nmtkit.cluster.launchers import LAUNCHERS, LocalLauncher, SshLauncher
    from nmtkit.cluster.slurm import SlurmLauncher
    assert LAUNCHERS["slurm"] is SlurmLauncher and LocalLauncher.one_process and not SlurmLauncher.one_process
    assert route_disagreements() == []
    monkeypatch.setattr(SshLauncher, "one_process", True)  # a class that changes its answer: the check says so
    assert route_disagreements() == ["--launcher ssh: route says one process=False, SshLauncher.one_process=True"]


LOCK_CALLS = {"take", "release", "session"}


def lock_calls(path: Path) -> set[str]:
    """The run-directory lock's calls in a module: x.take(), x.release(), x.session() (no arguments: the
    EngineControl's release(ids) is another thing)."""
    return {n.func.attr for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in LOCK_CALLS
            and not n.args and not n.keywords}


def test_one_owner_per_process_kind_takes_and_releases_the_lock():
    owners = {f.relative_to(ROOT).as_posix(): lock_calls(f) for f in _modules("**/*.py")
              if f.name not in ("runs.py", "runlock.py")}  # the lock's own modules
    owners = {k: v for k, v in owners.items() if v}
    # a lone run, the CLI driver, a notebook job: each module both takes and releases (session() does both)
    assert owners == {"nmtkit/training/loop.py": {"session"}, "nmtkit/cluster/driver.py": {"session"},
                      "nmtkit/cluster/jobs.py": {"take", "release"}}, owners
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc[doc.index("### Who holds the lock"):]
    for module in owners:
        assert module in section, module


def test_a_one_process_train_imports_no_cluster_module_and_freezes_its_config(nmt_data, tmp_path):
    from conftest import small_config
    cfg = small_config(**{"train.steps": 3, "train.log_every": 1, "eval.at_end": False})
    sets = [a for sec, part in cfg.to_dict().items() if isinstance(part, dict) for k, v in part.items()
            if k != "dir" for a in ("--set", f"{sec}.{k}={v}")]
    run = tmp_path / "run"
    probe = ("import json, sys\nfrom nmtkit import cli\nrc = cli.main(sys.argv[1:])\n"
             "print(json.dumps({'rc': rc, 'cluster': sorted(m for m in sys.modules if m.startswith('nmtkit.cluster')),"
             " 'loop': 'nmtkit.training.loop' in sys.modules}))\n")
    p = subprocess.run([sys.executable, "-c", probe, "train", "--profile", "tiny", "--data", str(nmt_data),
                        "--logdir", str(run), *sets], capture_output=True, text=True, timeout=600, cwd=ROOT)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["rc"] == 0 and out["loop"], p.stdout + p.stderr
    assert out["cluster"] == [], out["cluster"]
    assert json.loads((run / "run.json").read_text())["step"] == 3
    assert json.loads((run / "config.json").read_text())["data"]["dir"] == str(nmt_data)


def test_a_frozen_config_refuses_assignment_and_its_copies_do_not():
    from nmtkit import config
    from nmtkit.errors import ConfigError
    cfg = config.load("tiny").freeze()
    with pytest.raises(ConfigError, match="TrainConfig.steps: this config is settled for a run and frozen"):
        cfg.train.steps = 5
    with pytest.raises(ConfigError, match="frozen"):
        cfg.data = None
    copy = cfg.with_overrides({"train.steps": 7})
    copy.train.steps = 8
    assert (copy.train.steps, cfg.train.steps) == (8, config.load("tiny").train.steps)
