"""The bottleneck lab's reference runs: one rehearsal session, runs that vary one thing at a time, each frozen.

    python -m tools.rehearsal.lab --out runs/lab                 # rehearse every run of RUNS, then freeze each
    python -m tools.rehearsal.lab --out runs/lab --freeze-only   # freeze an earlier session's runs again

The rehearsal's two SSH-reached hosts (network namespaces of one machine, docs/rehearsal.md) train the same short
tiny run again and again: 2 hosts x 2 ranks unshaped (the compute-only run), then with the data link shaped by tc
to each rate, with fp16 compression at two of them, and for scaling 1 host x 1 rank and 2 hosts x 1 rank. Every
run's monitor samples the NICs every 0.1 s (at 1 s a sample averages over a whole step and hides the exchange's
bursts), preflight measures the link at each rate (run.json records it, as on real VMs), and each run is frozen
into nmtkit/reference/<name>/ (nmtkit.analysis.lab reads them) with a manifest saying how it was made. All ranks
run on the core of their host (PINNED): the manifest records each host's cores and each rank's affinity, the
machine's CPU per core and what the driver's side used, and the exchange alone, timed right after training.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from nmtkit import config, runs
from nmtkit.analysis import reference as shipped
from nmtkit.cluster.link import allreduce_seconds
from nmtkit.files import atomic_write_json, atomic_write_text, read_json, read_jsonl
from tools.rehearsal.netns import DATA_IFACE, RehearsalError, TwoHosts
from tools.rehearsal.reference import _machine, copy_run, file_list, staged
from tools.rehearsal.run import CODE_ROOT, TINY, Options, Rehearsal, rehearse
from tools.rehearsal.ssh import launcher_traits, start_cluster

STEPS = 48
# on top of the rehearsal's TINY: link samples every 0.1 s, no evaluations (the lab reads step times and bytes)
LAB = {"monitor.interval": 0.1, "train.log_every": 2, "eval.every": 0,
       "data.batch_sentences": 48}  # compute above the exchange at 200 Mbit/s, as in the reference run


@dataclass(frozen=True)
class Spec:
    name: str
    hosts: int
    ranks_per_host: int
    rate: str | None      # tc rate of the data link; None: unshaped (the compute-only run)
    compression: str = "none"


RUNS = (
    Spec("lab-unshaped", 2, 2, None), Spec("lab-1gbit", 2, 2, "1gbit"), Spec("lab-200mbit", 2, 2, "200mbit"),
    Spec("lab-100mbit", 2, 2, "100mbit"), Spec("lab-50mbit", 2, 2, "50mbit"),
    Spec("lab-200mbit-fp16", 2, 2, "200mbit", "fp16"), Spec("lab-50mbit-fp16", 2, 2, "50mbit", "fp16"),
    Spec("lab-2x1-1gbit", 2, 1, "1gbit"), Spec("lab-1x1", 1, 1, None),
)
PINNED = ("the two 'hosts' are network namespaces of one machine, each pinned to a core of its own (taskset on its "
          "sshd: every engine and rank started on it runs on that core alone; each rank log's `affinity` says so). A "
          "host's ranks share its core: more ranks than cores on a host oversubscribe it (shape.oversubscribed), and "
          "its ranks then compute by turns. The driver, controller, sshd and monitors are pinned apart when the "
          "machine has cores to spare, else their CPU share is recorded (side_processes)")


def host_cores() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """One core a host (the lab's unit of hardware), the rest of the machine's cores for everything else."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise RehearsalError(f"the lab pins each host to a core of its own: this process may run on {cpus} only")
    return (cpus[0],), (cpus[1],)


def side_cpu_s(net) -> float:
    """CPU seconds so far of this process and its children outside the hosts' sshd trees (driver, controller,
    ssh clients, counter samplers)."""
    import psutil
    hosts = {h.proc.pid for h in net.hosts if h.proc}
    total, todo = 0.0, [psutil.Process()]
    while todo:
        p = todo.pop()
        try:
            t = p.cpu_times()
            total += t.user + t.system
            todo += [c for c in p.children() if c.pid not in hosts]
        except psutil.NoSuchProcess:
            pass
    return total


class LabRehearsal(Rehearsal):
    job_timeout = 1800
    only: tuple[str, ...] = ()  # run names to make (default: all of `runs`)
    runs: tuple[Spec, ...] = RUNS
    model: dict = {}  # config overrides on top of TINY and LAB (a graded variant's model shape)
    data_iface = DATA_IFACE

    def specs(self) -> list[Spec]:
        return [s for s in self.runs if not self.only or s.name in self.only]

    def cfg(self, data: Path, steps: int, compression: str = "none"):
        return config.load("tiny", dict(TINY, **LAB, **self.model, **{"data.dir": str(data), "train.steps": steps,
                                                                      "train.compression": compression}))

    def run(self) -> dict:
        o = self.o
        node = o.out / "node"
        data, profile = node / "data", o.out / "ipython"
        node.mkdir(parents=True, exist_ok=True)
        from nmtkit.data.prepare import prepare
        prepare(self.cfg(data, o.steps), progress=False)
        self.r["runs"] = {}
        cores = host_cores()
        spare = sorted(os.sched_getaffinity(0) - set().union(*cores))
        if spare:  # the driver, controller and ssh clients (and what they start) off the hosts' cores
            os.sched_setaffinity(0, spare)
        self.r["cores"] = {"hosts": [list(c) for c in cores], "side_processes": spare or "unpinned: no core to spare"}
        with TwoHosts(rate=None, hide=node, cores=cores, data_iface=self.data_iface) as net:
            self.r["hosts"] = [{"name": h.name, "ssh": h.ctl_addr, "data_addr": h.data_addr} for h in net.hosts]
            traits = launcher_traits(net.ssh_config, CODE_ROOT, node / "ipython")
            shapes = list(dict.fromkeys((s.hosts, s.ranks_per_host) for s in self.specs()))
            for n_hosts, per_host in shapes:
                slots = {h.name: per_host for h in net.hosts[:n_hosts]}
                cluster, how = start_cluster(self.cfg(data, o.steps), slots, traits, listen_ip=net.listen_ip,
                                             iface=net.data_iface, profile_dir=profile)
                try:
                    for spec in (s for s in self.specs() if (s.hosts, s.ranks_per_host) == (n_hosts, per_host)):
                        self.one(net, cluster, data, spec, how)
                finally:
                    cluster.stop()
        self.r["ok"] = all(c["ok"] for c in self.r["checks"].values())
        self.r["seconds"] = round(time.time() - self.t0, 1)
        return self.r

    def one(self, net, cluster, data: Path, spec: Spec, how: str) -> None:
        net.set_rate(spec.rate)
        cluster.preflight(data)  # measures the link at this rate (run.json records it), pushes data once
        self.o.rate = spec.rate
        link = cluster.link
        import psutil
        side0, busy0, t0 = side_cpu_s(net), psutil.cpu_times(percpu=True), time.time()
        t, summaries = self.trial(net, cluster, data, self.o.out / spec.name, spec.compression, spec.rate)
        side, wall = side_cpu_s(net) - side0, time.time() - t0
        busy = [round(1 - (b.idle - a.idle) / max(1e-9, sum(b) - sum(a)), 3)
                for a, b in zip(busy0, psutil.cpu_times(percpu=True))]
        ranks = spec.hosts * spec.ranks_per_host
        exchange = None
        if ranks > 1:  # the exchange alone, timed on the same ranks and link right after training
            exchange = {"seconds": round(allreduce_seconds(cluster, summaries[0]["params"], 15, spec.compression), 4),
                        "values": summaries[0]["params"], "compression": spec.compression, "reps": 15,
                        "how": "median of 15 allreduces of the gradients' size on the idle ranks (the slowest "
                               "rank's), nmtkit.cluster.link.allreduce_seconds"}
        affinity = {}
        for r in range(ranks):
            recs = list(read_jsonl(runs.rank_log(self.o.out / spec.name, r)))
            affinity[str(r)] = {"host": recs[-1]["host"], "cores": recs[-1].get("affinity"),
                                "threads": recs[-1].get("threads")}
        self.check(f"{spec.name}: {ranks} ranks finished with identical weights",
                   t["finished"] and t["same_weights"] and len(summaries) == ranks,
                   f"{summaries[0]['step']} steps in {t['wall_time_s']:.0f} s, step {t['step_time_s']} s")
        self.r["runs"][spec.name] = {
            "spec": asdict(spec), "launch": how, "traffic": t, "load_avg_1m_after": round(os.getloadavg()[0], 2),
            "affinity": affinity, "exchange_by_probe": exchange,
            "cpu": {"busy_per_core": busy, "side_processes_cpu_s": round(side, 1), "wall_s": round(wall, 1),
                    "side_processes_share_of_machine": round(side / (wall * len(busy)), 3)},
            "link_by_preflight": None if link is None else {k: link.get(k) for k in ("mbit_s", "from", "to", "at")}}


def commit() -> str:
    """The code's commit (with "+changes" when the tree differs from it): how the run was made."""
    git = ["git", "-C", str(CODE_ROOT)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True).stdout.strip()
    return (head or "unknown") + ("+changes" if dirty else "")


def manifest(rec: dict, report: dict, steps: int) -> dict:
    spec, t, link = rec["spec"], rec["traffic"], rec["link_by_preflight"]
    ranks = spec["hosts"] * spec["ranks_per_host"]
    used = sorted({c for a in rec["affinity"].values() for c in a["cores"] or []})
    by_host = {}
    for a in rec["affinity"].values():
        by_host.setdefault(a["host"], sorted(a["cores"] or []))
    return {
        "what": "a bottleneck-lab reference run: the rehearsal's SSH-reached hosts, the same short tiny run as the "
                "lab's other runs, one thing varied (docs/rehearsal.md, nmtkit.analysis.lab)",
        "command": report["command"], "commit": report["commit"], "made": report["made"],
        "machine": report["machine"], "load_avg_1m_after": round(rec["load_avg_1m_after"], 1),
        "pinned": PINNED,
        "shape": {"hosts": spec["hosts"], "ranks_per_host": spec["ranks_per_host"], "ranks": ranks,
                  "cores": len(used), "cores_by_host": by_host, "machine_cpus": report["machine"]["cpus"],
                  "oversubscribed": any(spec["ranks_per_host"] > len(c) for c in by_host.values())},
        "affinity": rec["affinity"], "cpu": rec["cpu"], "cores_of_side_processes": report["cores"]["side_processes"],
        "exchange_by_probe": rec["exchange_by_probe"] or "one rank: no exchange",
        "tc_rate": spec["rate"] or "unshaped", "compression": spec["compression"], "steps": steps,
        "monitor_interval_s": LAB["monitor.interval"],
        "link_by_preflight": link or "one host: no link between hosts",
        "bytes_per_step_by_counters": {k: t.get(k) for k in ("tx_bytes_per_step_per_host", "ring_model_bytes_per_rank",
                                                              "ratio_to_model", "measured_steps", "params",
                                                              "step_time_s")},
        "left_out": "checkpoint data (its listing is checkpoints/listing.json), TensorBoard event files (scalars.jsonl "
                    "has the same values), the tokenizer, and the monitor logs of each host's other ranks (the same "
                    "NIC counters; the size budget)",
        "checks": {k: v["ok"] for k, v in report["checks"].items() if k.startswith(spec["name"] + ":")},
    }


def readme(name: str, m: dict) -> str:
    s = m["shape"]
    return (f"# {name}: {s['hosts']} host(s) x {s['ranks_per_host']} rank(s), link {m['tc_rate']}, compression "
            f"{m['compression']}\n\nOne of the bottleneck lab's reference runs (notebook 04; `nk.lab_runs()` tabulates "
            f"them): made by `{m['command']}` at commit {m['commit']}. {PINNED[0].upper()}{PINNED[1:]}."
            f"\n\nmanifest.json says how it was made; the logs are the run's own.\n")


def first_monitor_per_host(run: Path):
    """A filter keeping, of the monitor logs, the lowest rank's on each host: at 0.1 s four logs would pass the
    size budget, and a host's ranks record the same NIC counters."""
    logs = sorted((Path(runs.MONITOR_DIR) / p.name for p in (run / runs.MONITOR_DIR).glob("*-rank*.jsonl")),
                  key=lambda p: int(p.stem.rsplit("-rank", 1)[1]))
    first: dict[str, Path] = {}
    for p in logs:
        first.setdefault(p.stem.rsplit("-rank", 1)[0], p)
    keep = set(first.values())
    return lambda rel: rel.parts[0] != runs.MONITOR_DIR or Path(rel) in keep


def freeze_all(out: Path, dest_root: Path | None = None) -> list[Path]:
    out = Path(out).resolve()
    report = read_json(out / "report.json", RehearsalError, hint="written by python -m tools.rehearsal.lab")
    if not report.get("ok"):
        raise RehearsalError(f"{out}/report.md: the lab rehearsal was not green; freeze only a green one")
    made = []
    for name, rec in report["runs"].items():
        dest = (Path(dest_root) / name) if dest_root else shipped.default_dir(name)

        def write(stage: Path, rec=rec, name=name) -> int:
            copy_run(out / name, stage, out, keep=first_monitor_per_host(out / name))
            m = manifest(rec, report, report["steps"])
            atomic_write_text(stage / "README.md", readme(name, m))
            m["files"] = file_list(stage)
            atomic_write_json(stage / shipped.MANIFEST, m)
            return sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
        made.append(staged(dest, write))
    return made


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.rehearsal.lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the session's directory (one sub-directory a run)")
    ap.add_argument("--steps", type=int, default=STEPS, help="training steps of every run")
    ap.add_argument("--dest", type=Path, default=None, help="where the frozen runs go (default: nmtkit/reference/)")
    ap.add_argument("--freeze-only", action="store_true", help="freeze an earlier session's runs in --out")
    ap.add_argument("--only", default="", help="comma-separated run names to make (default: every run)")
    a = ap.parse_args(argv)
    if not a.freeze_only:
        from tools.rehearsal.netns import unavailable
        why = unavailable()
        if why:
            print(f"lab runs not made: {why}", file=sys.stderr)
            return 1
        record = {"command": f"python -m tools.rehearsal.lab --out <rehearsal> --steps {a.steps}",
                  "commit": commit(), "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "machine": _machine(), "steps": a.steps}
        unknown = set(filter(None, a.only.split(","))) - {s.name for s in RUNS}
        if unknown:
            print(f"--only: no run {', '.join(sorted(unknown))} (runs: {', '.join(s.name for s in RUNS)})",
                  file=sys.stderr)
            return 2
        LabRehearsal.only = tuple(filter(None, a.only.split(",")))
        r = rehearse(Options(out=a.out, rate=None, measure_rates=(), steps=a.steps, kill=False, compressions=()),
                     LabRehearsal, record)
        print(f"lab rehearsal {'green' if r['ok'] else 'RED'} in {r['seconds']} s: {a.out / 'report.md'}")
        if not r["ok"]:
            return 1
    for d in freeze_all(a.out, a.dest):
        print(f"frozen: {d} ({sum(p.stat().st_size for p in d.rglob('*') if p.is_file()):,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
