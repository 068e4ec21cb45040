"""The `nmtkit` command: the same functions the notebooks call, for runs outside Jupyter (e.g. under nohup).

    nmtkit doctor [--json]
    nmtkit prepare [--profile P] [--set k=v ...] [--data DIR] [--force]
    nmtkit train   [--profile P] [--set k=v ...] [--data DIR] --logdir DIR [--np N [--hosts H:2,H:2] [--launcher L]]
                   [--max-hours H] [--max-cost USD]
    nmtkit report  --run DIR [--run DIR2] [--out DIR] [--instructor]
    nmtkit export  --run DIR [--out DIR]
    nmtkit course  [--out DIR]
    nmtkit monitor [--interval S]
    nmtkit student [--out DIR]
    nmtkit grade   --submission DIR [--workspace WS] [--jobs N] [--only NN ...] [--out grades.json]   (instructor's kit)
    nmtkit grade   --class DIR --out OUTDIR [--jobs N] [--only NN ...]   (a class, in parallel: grades.csv)
    nmtkit release --out DIR                                                         (instructor's kit)

Your own corpus instead of the profile's (Moses-tokenized files are detected and detokenized):
    nmtkit prepare --train-src F --train-tgt F --dev-src F --dev-tgt F [--test-src F --test-tgt F] --data DIR
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import nmtkit  # selects the Keras 2 API before anything imports TensorFlow
from nmtkit import config as config_mod
from nmtkit import route

# the instructor's kit holds the course's verdicts; a student's release (nmtkit release) leaves them out
from nmtkit.course import INSTRUCTOR_KIT
from nmtkit.errors import ConfigError, NmtkitError


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None,
                   help=f"config profile ({', '.join(config_mod.PROFILES)}); default $NMTKIT_PROFILE or tiny")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.steps=200 (repeatable)")


def _config(args) -> config_mod.Config:
    cfg = config_mod.load(args.profile, args.overrides)
    if getattr(args, "data", None):
        cfg.data.dir = args.data
    return cfg


def cmd_doctor(args) -> int:
    from nmtkit import doctor
    return doctor.main(as_json=args.json, data_dir=args.data, profile=args.profile)


def cmd_prepare(args) -> int:
    from nmtkit.data.owncorpus import ROLES
    from nmtkit.data.prepare import prepare
    cfg = _config(args)
    own = {f"data.{r}": getattr(args, r) for r in ROLES if getattr(args, r)}
    if own:
        if not args.data and not any(o.strip().startswith("data.dir=") for o in args.overrides):
            raise ConfigError("--train-src and friends need --data DIR: where the prepared corpus goes "
                                         "(pass the same --data to `nmtkit train`)")
        cfg = cfg.with_overrides({"data.source": "files", **own})
    if args.tokenized is not None:
        cfg = cfg.with_overrides({"data.tokenized": "yes" if args.tokenized else "no"})
    stats = prepare(cfg, force=args.force)
    print(stats.table())
    print(f"data ready in {cfg.data.dir}")
    return 0


def cmd_train(args) -> int:
    """Decide once whether ranks are needed and check them (nothing started yet); then one RunDir and one settled,
    frozen config go to the loop or to the cluster's driver."""
    distributed = route.needs_ranks(args)
    if distributed:
        from nmtkit.cluster.driver import check_ranks
        check_ranks(args.np, args.hosts)  # before anything: no engine, no SSH, no run directory
    if args.dry_run:
        return dry_run(_config(args))
    if not args.logdir:
        raise ConfigError("nmtkit train needs --logdir DIR: the run directory (config, logs, checkpoints)")
    from nmtkit.runs import RunDir  # names a file where the run directory belongs; ranks elsewhere need it absolute
    run = RunDir(Path(args.logdir).resolve() if distributed else args.logdir)
    cfg = route.settled(_config(args), args, distributed)
    if distributed:
        from nmtkit.cluster.driver import train_distributed
        return train_distributed(cfg, run, np=args.np, resume=not args.fresh)
    from nmtkit.allocation import allocation_end
    from nmtkit.training.loop import train
    summary = train(cfg, run, resume=not args.fresh, deadline=allocation_end())  # salloc/sbatch: stop before its end
    why = f" ({summary['reason']})" if summary.get("reason") else ""
    print(f"run {summary.get('status', 'finished')}{why} at step {summary.get('step')}: {args.logdir}")
    return 0 if summary.get("status") in ("finished", "stopped") else 1


def dry_run(cfg) -> int:
    """`nmtkit train --dry-run`: the step's projected memory and the micro-batches, from the config alone (no data,
    nothing written): for a first GPU run, before paying for hours."""
    from nmtkit.gpus import gpu_memory
    from nmtkit.model.memory import GIB, fit
    from nmtkit.training.precision import decide_precision
    device = gpu_memory()
    gpus = int(device is not None)
    precision, why = decide_precision(cfg.train.precision, gpus, d_model=cfg.model.d_model)
    where = f"a {device / GIB:.1f} GiB GPU" if device else "this CPU (no GPU memory to fit)"
    print(f"dry run: {cfg.data.vocab_size:,}-token vocabulary, {cfg.data.batch_sentences} sentences per device, "
          f"{precision} ({why}), on {where}")
    print(fit(cfg, cfg.data.vocab_size, device, precision).line())
    return 0


def cmd_report(args) -> int:
    if args.instructor:
        from nmtkit.course.instructor.book import write_instructor_report
        path = write_instructor_report(args.run, out_dir=args.out)
    else:
        from nmtkit.analysis.report import write_report
        path = write_report(args.run, out_dir=args.out)
    print(f"report: {path}")
    return 0


def cmd_export(args) -> int:
    from nmtkit.serving import export
    path = export(args.run, out_dir=args.out)
    print(f"SavedModel: {path}")
    return 0


def cmd_course(args) -> int:
    from nmtkit.course.runner import run_course
    return run_course(out_dir=args.out, profile=args.profile, publish_outputs=args.publish,
                      until_first=args.until_first)


def cmd_student(args) -> int:
    from nmtkit.course.student import NOTEBOOKS_DIR, write_student_copies
    for path, replaced in write_student_copies(out_dir=args.out, src_dir=args.notebooks or NOTEBOOKS_DIR,
                                               for_nbgrader=args.nbgrader, force=args.force):
        print(f"{path}: {replaced} exercise(s), instructor cells removed: nbgrader's source" if args.nbgrader else
              f"{path}: {replaced} solution(s) replaced by `raise NotImplementedError`, outputs cleared")
    return 0


def cmd_variant(args) -> int:
    from nmtkit.analysis import variants
    if args.action == "list":
        for name in variants.names():
            meta = variants.info(name)
            print(f"{name}: reference run {meta['reference']}" + (f", {meta['params']:,} parameters" if "params" in
                                                                   meta else "") + f"; {meta.get('what', '')}")
        return 0
    if args.action in ("expected", "record"):
        if not INSTRUCTOR_KIT:
            raise ConfigError(f"nmtkit variant {args.action}: course staff only (the instructor's kit)")
        from nmtkit.course.instructor import variant_commands
        return variant_commands.expected() if args.action == "expected" else variant_commands.record(args.rest)
    from nmtkit.course.variant import variant
    variant(student_id=args.id, ask=sys.stdin.isatty())
    return 0


def cmd_monitor(args) -> int:
    from nmtkit.monitor import live
    return live(interval=args.interval, out=args.out)


def _add_prepare(sub) -> None:
    p = sub.add_parser("prepare", help="make or download the corpus, clean it, learn the joint BPE, encode")
    _add_config_args(p)
    p.add_argument("--data", default=None, help="data directory (default: the profile's data.dir)")
    p.add_argument("--force", action="store_true", help="redo every step even if the manifest says done")
    own = p.add_argument_group("your own corpus (instead of data.source): one sentence per line, aligned by line")
    for role in ("train", "dev", "test"):
        for side, lang in (("src", "source (English)"), ("tgt", "target (German)")):
            own.add_argument(f"--{role}-{side}", dest=f"{role}_{side}", metavar="FILE", default=None,
                             help=f"{role} split, {lang} side" + (" (optional: dev is used without it)"
                                                                   if role == "test" else ""))
    own.add_argument("--tokenized", action=argparse.BooleanOptionalAction, default=None,
                     help="the files are Moses-tokenized (`isn &apos;t`): detokenize them; default: detect per file")
    p.set_defaults(func=cmd_prepare)


def _add_train(sub) -> None:
    p = sub.add_parser("train", help="train (or resume) the Transformer: one process, or --np ranks with Horovod")
    _add_config_args(p)
    p.add_argument("--data", default=None, help="prepared data directory (default: the profile's data.dir)")
    p.add_argument("--logdir", default=None, help="run directory: config, logs, TensorBoard, checkpoints (required "
                                                   "unless --dry-run)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the step's projected memory per device and the micro-batches it would use; no data "
                        "needed, nothing written")
    p.add_argument("--fresh", action="store_true", help="refuse to resume: fail if the run directory has checkpoints")
    p.add_argument("--np", type=int, default=1, metavar="N",
                   help="Horovod ranks (ipyparallel engines, as notebook 03); default 1: this process alone")
    p.add_argument("--hosts", default="", metavar="H1:2,H2:2",
                   help="nodes and their slots, e.g. 10.0.0.5:2,10.0.0.6:2 (the homework's mpirun -H); "
                        "default: local engines posing as nodes")
    p.add_argument("--max-hours", type=float, default=None, metavar="H",
                   help="budget: stop cleanly (checkpoint, dev and test evaluation, status stopped, reason budget) "
                        "before the run's training time, all sessions together, would pass H hours; relaunch with "
                        "a larger budget to resume (train.max_hours)")
    p.add_argument("--max-cost", type=float, default=None, metavar="USD",
                   help="budget in dollars at monitor.price_per_node_hour x nodes, as --max-hours (train.max_cost)")
    p.add_argument("--launcher", default="auto", choices=config_mod.choices("cluster.launcher"),
                   help="how engines start: local processes, over SSH to --hosts, by hand (manual), or as a Slurm "
                        "job of --np tasks (slurm: sbatch, or srun inside your allocation; partition, account, time "
                        "and GPUs from --set cluster.slurm_*=...)")
    p.set_defaults(func=cmd_train)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad command line gets one line (the option, the cause, where the options are listed), not
    the usage block above the error; the subcommands' parsers are of this class too (add_subparsers copies it)."""

    def error(self, message: str):
        fix = {"invalid float value": "give a number, e.g. 1.5", "invalid int value": "give a whole number, e.g. 2",
               "invalid choice": "pick one of those"}
        hint = next((f"{v}; " for k, v in fix.items() if k in message), "")
        self.exit(2, f"{self.prog}: {message}; {hint}`{self.prog} --help` lists the options\n")


def add_variant(sub) -> None:
    """`nmtkit variant`: the student's (show, --id, list) and, in the instructor's kit, expected and record."""
    p = sub.add_parser("variant", help="which shipped runs your graded figures come from, chosen by your student id"
                                       + ("; course staff: list, expected, record" if INSTRUCTOR_KIT else ""))
    p.add_argument("action", nargs="?", default="show",
                   choices=["show", "list", *(["expected", "record"] if INSTRUCTOR_KIT else [])],
                   help="show (default): your variant; list: every variant installed"
                        + ("; expected: write the practice variant's expected figures; record: "
                           + __import__("nmtkit.course.instructor.variant_commands", fromlist=["x"]).RECORD_HELP
                           if INSTRUCTOR_KIT else ""))
    p.add_argument("--id", default=None, help="your student id, stored beside your work (asked once otherwise)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_variant)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="nmtkit", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"nmtkit {nmtkit.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="check the stack: Python, TensorFlow, Keras, Horovod build, GPUs, disk")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--data", default="data", help="where data goes (for the free-disk check)")
    p.add_argument("--profile", default=None, help="the profile whose disk need is checked (default $NMTKIT_PROFILE, "
                   "else tiny)")
    p.set_defaults(func=cmd_doctor)

    _add_prepare(sub)
    _add_train(sub)

    p = sub.add_parser("report", help="answer the homework's questions from a run's logs; writes report.md")
    p.add_argument("--run", action="append", required=True, help="run directory (repeat to compare runs)")
    p.add_argument("--out", default=None, help="where report.md and figures go (default: the first run)")
    if INSTRUCTOR_KIT:  # a student's release has no verdicts or rubric to add
        p.add_argument("--instructor", action="store_true",
                       help="course staff: include the kit's verdicts and the grading rubric (students get the "
                            "evidence)")
    p.set_defaults(func=cmd_report, instructor=False)

    p = sub.add_parser("export", help="export the best checkpoint as a SavedModel (strings in, strings out)")
    p.add_argument("--run", required=True, help="run directory")
    p.add_argument("--out", default=None, help="output directory (default: <run>/saved_model)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("course", help="run notebooks 01-06 headless in order (what `make demo` runs)")
    p.add_argument("--profile", default=None, help="profile for the notebooks (default tiny)")
    p.add_argument("--out", default=None, help="output directory (default runs/<timestamp>)")
    p.add_argument("--publish", action="store_true",
                   help="course staff: copy the executed notebooks over notebooks/ (the reference outputs nbval "
                        "checks)")
    p.add_argument("--until-first", action="store_true", help="each notebook only up to its first unanswered exercise")
    p.set_defaults(func=cmd_course)

    p = sub.add_parser("student", help="course staff: student copies of the notebooks, solutions removed")
    p.add_argument("--out", default="student", help="output directory (default: student/)")
    p.add_argument("--notebooks", default=None, help="instructor notebooks (default: the kit's notebooks/)")
    p.add_argument("--nbgrader", action="store_true",
                   help="write nbgrader's source versions instead (solutions kept, instructor cells removed): put "
                        "them in <course>/source/<assignment>/ for nbgrader generate_assignment")
    p.add_argument("--force", action="store_true",
                   help="move aside (into DIR/replaced-<time>/) notebooks in DIR that the kit did not write or that "
                        "changed since; without it such a DIR is refused and nothing is written")
    p.set_defaults(func=cmd_student)

    if INSTRUCTOR_KIT:  # grading and the release: the instructor's kit only
        from nmtkit.course.instructor.commands import add
        add(sub)

    add_variant(sub)

    p = sub.add_parser("monitor", help="live CPU/GPU/network view in the terminal (nmon-like)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--out", default=None, help="also append samples to this JSONL file")
    p.set_defaults(func=cmd_monitor)
    return parser


def _error_log(args) -> Path:
    """Where a failure's traceback goes: the run directory the command worked on, else the temp dir."""
    run = getattr(args, "run", None)
    run = run[0] if isinstance(run, list) else run
    from nmtkit.runs import ERROR_LOG, RunDir
    for d in (getattr(args, "logdir", None), run):
        if d and Path(d).is_dir() and os.access(d, os.W_OK):
            return RunDir(d).error_log
    return Path(tempfile.gettempdir()) / ERROR_LOG


def _one_line(e: BaseException) -> str:
    """The error's message as one line (an NmtkitError's names the file or key and what to do)."""
    return " ".join(str(e).split()) or type(e).__name__


def _log_traceback(args) -> Path | None:
    log = _error_log(args)
    try:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} nmtkit {' '.join(sys.argv[1:])}\n")
            traceback.print_exc(file=f)
        return log
    except OSError:
        return None


_terminated = threading.Event()  # SIGTERM outside the training loop (which handles it itself: stop, checkpoint)


def _terminate(signum, frame):
    _terminated.set()
    # SystemExit, not KeyboardInterrupt: CPython remembers a KeyboardInterrupt raised inside `PyRun_String` (which
    # TensorFlow's pybind11 modules call while importing) and, under `python -m`, kills the process by SIGINT after
    # main() returned 143 (CI saw exit -2). Like KeyboardInterrupt, it passes every `except Exception`.
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
        # `kill -USR1 <pid>`: every thread's stack on stderr, the process goes on (where a slow or stuck driver is)
        import faulthandler
        try:
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        except (OSError, ValueError):  # a stderr without a file descriptor (called in-process, output captured)
            pass
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"nmtkit: config error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit) as e:
        if _terminated.is_set():
            print("nmtkit: stopped by SIGTERM before the work could start or finish; run the same command again to "
                  "resume", file=sys.stderr)
            return 143
        if isinstance(e, SystemExit):
            raise
        print("nmtkit: interrupted", file=sys.stderr)
        return 130
    except NmtkitError as e:  # the kit's own: the message says what and what to do; the traceback in a log file
        log = _log_traceback(args)
        print(f"nmtkit: {_one_line(e)}" + (f" (traceback in {log})" if log else ""), file=sys.stderr)
        return 1
    except OSError as e:  # a full disk, a file where a directory belongs, no permission: the machine's or the input's
        from nmtkit.files import os_problem
        log = _log_traceback(args)
        print(f"nmtkit: {os_problem(e)}" + (f" (traceback in {log})" if log else ""), file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001  anything else is a bug in nmtkit: say so, one line, and where to look
        log = _log_traceback(args)
        print(f"nmtkit: internal error (a bug, please report it with the log): {type(e).__name__}: {_one_line(e)}"
              + (f" (traceback in {log})" if log else ""), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
