"""The bottleneck lab's measurements (notebook 04): one row per run, and a run's link samples.

    lab = nk.lab_runs()                    # the shipped lab runs (tools.rehearsal.lab made them), one row each
    lab = nk.lab_runs(["horovod", ...])    # the same table for your own runs (names in the workspace, or paths)
    s = nk.link_samples("lab-200mbit")     # one row per monitor sample while steps ran: host, t_s, mbit_s

Measurements only: each run's shape and the cores its ranks could use (manifest, else the rank logs' affinity),
its gradient compression, the link rate preflight measured (run.json), the mean steady step and the tokens per
second (rank logs), the mean and the busiest 0.1 s rate its link carried while steps ran (monitor), the CPU
utilisation while steps ran (the machine's, and the sampling rank's own process), and the exchange alone where the
run timed it (its manifest's exchange_by_probe).
What they imply (a prediction, a fit, an effective bandwidth) is the student's to compute. TensorFlow-free.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from nmtkit import monitor
from nmtkit.analysis.evidence import Options, bytes_per_param, steady_steps
from nmtkit.analysis.logs import Run, load_run
from nmtkit.analysis.machines import (
    counted_per_step,
    first_rank_steps,
    in_window,
    link_iface,
    net_busiest_direction,
    per_host,
    while_stepping,
)
from nmtkit.analysis.reference import MANIFEST
from nmtkit.errors import AnalysisError
from nmtkit.files import read_json

PREFIX = "lab-"  # the shipped lab runs: nmtkit/reference/lab-*/


def shipped() -> list[Path]:
    """The lab's reference runs in the package, fewest ranks last, then by the link's measured rate (fastest
    first): the order of the lab's table."""
    import nmtkit.analysis.variants as variants
    root = variants.directory(variants.active())  # the active variant's own lab runs, never mixed with another's
    found = [d for d in sorted(root.glob(PREFIX + "*")) if (d / MANIFEST).is_file()]
    if not found:
        raise AnalysisError(f"{root}: no lab runs ({PREFIX}*) installed; reinstall nmtkit with its package data "
                            f"(pip install -e .)")

    def key(d: Path):
        m = read_json(d / MANIFEST, AnalysisError)
        link = m.get("link_by_preflight")
        return (-m["shape"]["ranks"], -(link["mbit_s"] if isinstance(link, dict) else float("inf")),
                m["compression"])
    return sorted(found, key=key)


def _resolve(run) -> Path:
    if isinstance(run, Run):
        return run.path
    p = Path(run)
    if p.is_dir():
        return p
    import nmtkit.analysis.variants as variants
    if (variants.run_dir(str(run)) / MANIFEST).is_file():  # a shipped run's name: the active variant's
        return variants.run_dir(str(run))
    from nmtkit.runs import workspace
    if (workspace() / str(run)).is_dir():
        return workspace() / str(run)
    raise AnalysisError(f"{run}: no such run (a lab run's name such as lab-200mbit, a run in the workspace, or a "
                        f"run directory)")


def _load(run) -> Run:
    return run if isinstance(run, Run) else load_run(_resolve(run))


def _manifest(run: Run) -> dict:
    p = run.path / MANIFEST
    return read_json(p, AnalysisError) if p.is_file() else {}


def link_samples(run, options: Options | None = None, iface: str | None = None) -> pd.DataFrame:
    """The link's samples while steps ran: host, t_s (seconds since that host's first steady step), mbit_s (the
    busier direction of the interface that carried the gradients, or of `iface`). attrs: iface, ifaces (every
    interface the monitor counted), interval_s, step_s, link_mbit_s, and bytes_per_step: the bytes that interface
    counted between step ends, per step, the mean over the hosts (nmtkit.analysis.machines.counted_per_step: the
    one estimator of bytes per step, question 5's too; NaN without two step ends in a host's samples).

    Introduced in notebook 04_bottleneck_lab."""
    o, run = options or Options(), _load(run)
    mon = in_window(per_host(run.monitor), run)
    st = steady_steps(run, o.skip_steps)
    if mon.empty or st.empty:
        raise AnalysisError(f"{run.name}: needs monitor samples and per-step records (monitor/, ranks/)")
    ifaces = monitor.interfaces(mon.columns)
    if iface is not None and monitor.iface_key(iface) not in ifaces:
        raise AnalysisError(f"{run.name}: no interface {iface!r} in its monitor logs (they count {', '.join(ifaces)})")
    iface, why = (monitor.iface_key(iface), "") if iface is not None else link_iface(run, mon)
    if iface is None:
        raise AnalysisError(f"{run.name}: {why}")
    parts = []
    for host, df in mon.groupby("host"):
        mine = first_rank_steps(st, host)
        active = while_stepping(df, mine)
        if active.empty:
            continue
        start = float((mine["wall_time"] - mine["step_time"]).min())
        parts.append(pd.DataFrame({"host": str(host), "t_s": active["time"].to_numpy(float) - start,
                                   "mbit_s": net_busiest_direction(active, iface).to_numpy(float) * 8 / 1e6}))
    if not parts:
        raise AnalysisError(f"{run.name}: no monitor sample falls inside a step")
    out = pd.concat(parts, ignore_index=True)
    interval = float(mon.sort_values("time").groupby("host")["time"].diff().median())
    counted = counted_per_step(run, mon, iface, o).get("bytes_per_step", float("nan"))
    out.attrs.update(run=run.name, iface=iface, ifaces=ifaces, interval_s=round(interval, 3),
                     step_s=float(st["step_time"].mean()), link_mbit_s=run.status.get("link_measured_mbit_s"),
                     bytes_per_step=counted)
    return out


def _row(run: Run, o: Options) -> dict:
    m = _manifest(run)
    shape = m.get("shape") or {}
    st = steady_steps(run, o.skip_steps)
    if st.empty:
        raise AnalysisError(f"{run.name}: no steady steps in ranks/rank<R>.jsonl")
    ranks = run.n_ranks
    cores = shape.get("cores") or _cores(run)
    step_s = float(st["step_time"].mean())
    tokens = float(st.groupby("step")["tokens"].sum().mean()) if "tokens" in st else float("nan")
    mean = peak = counted = 0.0 if len(run.hosts) == 1 else float("nan")
    if len(run.hosts) > 1:
        try:
            s = link_samples(run, o)
            mean, peak = float(s.groupby("host")["mbit_s"].mean().mean()), float(s["mbit_s"].max())
            counted = s.attrs["bytes_per_step"]
        except AnalysisError:
            pass
    cpu, rank_cpu = _cpu_while_stepping(run, st)
    link = run.status.get("link_measured_mbit_s")
    probe = m.get("exchange_by_probe")
    over = shape.get("oversubscribed")
    return {"run": run.name, "hosts": len(run.hosts), "ranks": ranks, "cores": cores,
            "oversubscribed": bool(over) if over is not None else bool(cores and ranks > cores),
            "compression": run.config.train.compression if run.config else "unknown",
            "bytes_per_value": bytes_per_param(run), "params": run.status.get("params"),
            "tc_rate": m.get("tc_rate", "not shaped by the kit"),
            "link_mbit_s": float(link) if isinstance(link, (int, float)) else float("nan"),
            "steps_measured": int(st["step"].nunique()), "step_s": step_s, "tokens_per_s": tokens / step_s,
            "link_mean_mbit_s": mean, "link_peak_mbit_s": peak, "bytes_per_step": counted, "cpu_percent": cpu,
            "rank_cpu_percent": rank_cpu,
            "exchange_s": float(probe["seconds"]) if isinstance(probe, dict) else float("nan")}


def _cpu_while_stepping(run: Run, st: pd.DataFrame) -> tuple[float, float]:
    """(the machine's CPU utilisation, % of all its cores; the sampling rank's own process, % of one core): the
    means over the monitor samples taken while steps ran, averaged over the hosts. NaN without samples."""
    mon = in_window(per_host(run.monitor), run)
    machine, own = [], []
    for host, df in mon.groupby("host") if "cpu_percent" in mon else ():
        active = while_stepping(df, first_rank_steps(st, host))
        if len(active):
            machine.append(float(active["cpu_percent"].mean()))
            if "proc_cpu_percent" in active:
                own.append(float(active["proc_cpu_percent"].mean()))
    return _mean(machine), _mean(own)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _cores(run: Run) -> int | None:
    """The cores the run's ranks could use: the rank logs' affinity, per host (logical hosts of one machine: their
    union), else the machine's CPU count as the monitor saw it (a run made before rank logs recorded affinity)."""
    if "affinity" in run.ranks and run.ranks["affinity"].notna().any():
        per_host = {}
        for host, cores in zip(run.ranks.get("host", [""] * len(run.ranks)), run.ranks["affinity"]):
            if isinstance(cores, list):
                per_host.setdefault(host, set()).update(cores)
        if run.config is not None and run.config.cluster.logical_hosts:  # "nodes" of one machine: shared cores
            return len(set().union(*per_host.values())) or None
        return sum(len(c) for c in per_host.values()) or None
    return int(run.monitor["cpu_count"].max()) if "cpu_count" in run.monitor else None


def lab_runs(runs=None, options: Options | None = None) -> pd.DataFrame:
    """The lab's tidy table, one row per run: `runs` names them (lab-* names, workspace runs or directories);
    None: the shipped lab runs. attrs["paths"]: the run directories, for the checks; attrs["files"]: what was read of
    each (logs.digests), the runs' identity a graded figure carries.

    Introduced in notebook 04_bottleneck_lab."""
    o = options or Options()
    loaded = [_load(r) for r in (shipped() if runs is None else runs)]
    if not loaded:
        raise AnalysisError("no runs given: name at least one (or none for the shipped lab runs)")
    frame = pd.DataFrame([_row(r, o) for r in loaded]).set_index("run")
    frame.attrs["paths"] = [str(r.path) for r in loaded]
    frame.attrs["files"] = [dict(r.files) for r in loaded]
    return frame

