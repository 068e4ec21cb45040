"""Measurements of the machines: utilisation and network (questions 4, 5 and 11), from the monitor samples
(column names: nmtkit.monitor) and the per-step records. Same contract as nmtkit.analysis.evidence."""
from __future__ import annotations

import numpy as np
import pandas as pd

from nmtkit import monitor
from nmtkit.analysis.evidence import Options, params_from_checkpoint, steady_steps
from nmtkit.analysis.logs import Run
from nmtkit.errors import AnalysisError

# --- monitor frames, shared with the figures ------------------------------------------------------------

def per_host(mon: pd.DataFrame) -> pd.DataFrame:
    """One sampler per node: every rank on a node samples the same machine, so keep its lowest rank's records."""
    if mon.empty or "host" not in mon:
        return mon
    lowest = mon.groupby("host")["rank"].transform("min")
    return mon[mon["rank"] == lowest].sort_values(["host", "time"]).reset_index(drop=True)


def net_total(mon: pd.DataFrame, iface: str) -> pd.Series:
    """Bytes/s sent + received on one interface, per sample."""
    return mon[monitor.net_col(iface, "sent")].fillna(0) + mon[monitor.net_col(iface, "recv")].fillna(0)


def net_busiest_direction(mon: pd.DataFrame, iface: str) -> pd.Series:
    """Bytes/s of the busier direction per sample (a full-duplex link saturates one direction at a time)."""
    return mon[[monitor.net_col(iface, d) for d in monitor.NET_DIRECTIONS]].fillna(0).max(axis=1)


def busy_interfaces(mon: pd.DataFrame, top: int = 3, share: float = 0.05) -> list[str]:
    """The interfaces that carried traffic: at most `top`, each at least `share` of the busiest one's bytes
    (machines with containers or namespaces have dozens of idle virtual interfaces)."""
    traffic = {i: float(net_total(mon, i).sum()) for i in monitor.interfaces(mon.columns)}
    if not traffic or max(traffic.values()) <= 0:
        return []
    best = max(traffic.values())
    return sorted((i for i in traffic if traffic[i] >= share * best), key=traffic.get, reverse=True)[:top]


LINK_SHARE_OF_LO = 0.1  # up to 10 ranks a host; idle NICs beside loopback-only training carry far less


def link_iface(run: Run, mon: pd.DataFrame) -> tuple[str | None, str]:
    """The interface that carries inter-node traffic, and why it was chosen."""
    ifaces = monitor.interfaces(mon.columns)
    if not ifaces:
        return None, "the monitor logs hold no network counters"
    cfg_iface = run.config.cluster.iface if run.config else ""
    if cfg_iface and monitor.net_col(cfg_iface, "sent") in mon:
        return monitor.iface_key(cfg_iface), "cluster.iface in the config"
    traffic = {i: float(net_total(mon, i).mean()) for i in ifaces}
    # Ranks on several hosts: the link between them is not loopback, which carries the ring edges between ranks of
    # one host (traffic to a host's own address, its data-link address included, goes over lo): with 2 ranks a
    # host, as much as the link. But local engines posing as nodes (cluster.logical_hosts) are "hosts" too, and
    # theirs is all on lo: so lo is set aside only when another interface carried a real share of its bytes
    # (a link carries one ring edge each way per host; lo one per extra rank on the host).
    hosts = len(run.hosts)
    others = {i: b for i, b in traffic.items() if i != "lo"}
    if hosts > 1 and "lo" in traffic and others and max(others.values()) >= LINK_SHARE_OF_LO * traffic["lo"]:
        traffic = others
    # Gradients dominate a distributed run's traffic, so the busiest interface is the one that carried them
    # (loopback when the "nodes" are engines on one machine).
    best = max(traffic, key=traffic.get)
    if best == "lo":
        return best, "the busiest interface: loopback, the 'nodes' share one machine"
    return best, ("the busiest interface during training" + (" apart from loopback, which carries only what "
                                                            "stays within a host" if hosts > 1 else ""))


def in_window(mon: pd.DataFrame, run: Run) -> pd.DataFrame:
    """Monitor samples taken while training ran (samples before the first step or after the last are idle time)."""
    start, end = run.wall_clock()
    if mon.empty or start is None:
        return mon
    w = mon[(mon["time"] >= start) & (mon["time"] <= end + 1.0)]
    return w if len(w) else mon


def while_stepping(mon: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The samples whose interval (t - interval, t] overlaps a step of `steps` (one rank's records): traffic while
    training steps ran, not during evaluation, checkpointing or start-up."""
    if mon.empty or steps.empty:
        return mon.iloc[0:0]
    mon = mon.sort_values("time")
    interval = float(mon["time"].diff().median()) if len(mon) > 1 else 1.0
    st = steps.sort_values("wall_time")
    ends = st["wall_time"].to_numpy(float)
    starts = ends - st["step_time"].to_numpy(float)
    t = mon["time"].to_numpy(float)
    i = np.searchsorted(ends, t - interval, side="right")  # the first step ending inside or after the window
    ok = i < len(ends)
    ok[ok] &= starts[i[ok]] < t[ok]
    return mon[ok]



# --- Q4 utilisation --------------------------------------------------------------------------------------

def device_columns(mon: pd.DataFrame) -> list[str]:
    """The utilisation columns to judge: every GPU that reported, else the CPU."""
    return [c for c in monitor.gpu_util_cols(mon.columns) if mon[c].notna().any()] or ["cpu_percent"]


def measure_utilisation(run: Run, o: Options) -> dict:
    """Mean utilisation of every device on every node while training ran, and the share of time above busy_util."""
    mon = in_window(per_host(run.monitor), run)
    if mon.empty:
        raise AnalysisError("monitor samples (monitor/<host>-rank<R>.jsonl: run training with monitor.enabled)")
    rows = []
    for host, df in mon.groupby("host"):
        for c in device_columns(df):
            x = df[c].dropna()
            row = {"host": host, "device": c.split("_")[0], "mean": float(x.mean()),
                   "busy_share": float((x > o.busy_util).mean()), "samples": len(x)}
            used, total = (c.replace("_util", "_mem_used_mib"), c.replace("_util", "_mem_total_mib"))
            if c != "cpu_percent" and used in df and df[used].notna().any():
                row.update(mem_peak_mib=float(df[used].max()),
                           mem_total_mib=float(df[total].max()) if total in df else float("nan"))
            rows.append(row)
    procs = [{"host": h, "rank": int(r), "proc_cpu_mean": float(df["proc_cpu_percent"].mean())}
             for (h, r), df in mon.groupby(["host", "rank"]) if df["proc_cpu_percent"].notna().any()
             ] if {"proc_cpu_percent", "rank"} <= set(mon.columns) else []
    summary = run.status.get("summary") or {}
    # system CPU counts every process on the machine; a rank's own (% of one core) says what training used
    # the peak the run measured is an input of MFU; MFU itself is the student's to derive (question 4)
    return {"devices": rows, "rank_processes": procs, "threshold_percent": o.busy_util,
            "cpu_count": int(mon["cpu_count"].max()) if "cpu_count" in mon and mon["cpu_count"].notna().any() else None,
            "peak_flops": summary.get("peak_flops"),
            "peak_source": summary.get("peak_source", "unknown")}


# --- Q5 network against the link ----------------------------------------------------------------------------

def link_capacity(run: Run, o: Options) -> tuple[float | None, str]:
    """(Gbit/s, where it comes from): given in the options, measured by preflight (run.json's
    link_measured_mbit_s, with who -> who and when), else the config's assumed monitor.link_gbps."""
    if o.link_gbps is not None:
        return o.link_gbps, "given by the caller (Options.link_gbps)"
    measured = run.status.get("link_measured_mbit_s")
    if isinstance(measured, (int, float)) and measured > 0:
        m = run.status.get("link_measured") or {}
        who = f" from {m['from']} to {m['to']}" if m.get("from") and m.get("to") else ""
        when = f" at {str(m['at']).replace('T', ' ').replace('Z', ' UTC')}" if m.get("at") else ""
        return measured / 1000, f"measured by preflight: {measured:g} Mbit/s{who}{when}"
    if run.config:
        return run.config.monitor.link_gbps, "assumed from monitor.link_gbps: run.json holds no measured link"
    return None, ""


def measure_network(run: Run, o: Options) -> dict:
    """What each node's link carried while steps ran (bytes/s, the busier direction), beside the link's capacity
    and the parameter count: the measurements question 5 starts from (the bound and its verdict are the
    student's; the course's are in nmtkit.course.instructor.judgments)."""
    n = run.n_ranks
    mon = in_window(per_host(run.monitor), run)
    if n <= 1:  # no gradient exchange: only say what the busiest interface carried
        ev = {"ranks": n}
        iface = link_iface(run, mon)[0] if not mon.empty else None
        if iface:
            ev.update(iface=iface, mean_Bps=float(net_busiest_direction(mon, iface).mean()))
        return ev
    st = steady_steps(run, o.skip_steps)
    link_gbps, link_source = link_capacity(run, o)
    if mon.empty:
        raise AnalysisError("monitor samples with network counters (monitor/*.jsonl)")
    if st.empty:
        raise AnalysisError("per-step times (ranks/rank<R>.jsonl) for the step rate")
    if link_gbps is None:
        raise AnalysisError("the link capacity: set monitor.link_gbps (config.json is missing)")
    iface, why = link_iface(run, mon)
    if iface is None:
        raise AnalysisError(why)
    params, psrc = params_from_checkpoint(run)
    if params is None:
        raise AnalysisError(f"the parameter count for the allreduce estimate: {psrc}")
    hosts = []
    for host, df in mon.groupby("host"):
        mine = first_rank_steps(st, host)
        active = while_stepping(df, mine) if not mine.empty else df
        df = active if len(active) else df  # no overlap (steps far shorter than the interval, or clocks apart)
        busiest = net_busiest_direction(df, iface)
        ranks_here = int(run.ranks[run.ranks["host"] == host]["rank"].nunique()) if not run.ranks.empty else 1
        hosts.append({"host": host, "samples_while_stepping": len(active), "mean_Bps": float(busiest.mean()),
                      "p95_Bps": float(busiest.quantile(0.95)), "ranks": ranks_here})
    return {"ranks": n, "iface": iface, "iface_choice": why, "link_gbps": link_gbps, "link_source": link_source,
            "params": params, "params_source": psrc, "hosts": hosts}


def counted_bytes(mon: pd.DataFrame, iface: str, direction: str, times) -> np.ndarray:
    """Bytes an interface counted from its first sample to each of `times` (epoch s): a sample's rate covers the
    interval since the sample before it (the first: one median interval), linear within it."""
    mon = mon.sort_values("time")
    t = mon["time"].to_numpy(float)
    rate = mon[monitor.net_col(iface, direction)].fillna(0).to_numpy(float)
    dt = np.diff(t, prepend=t[0] - (float(np.median(np.diff(t))) if len(t) > 1 else 1.0))
    return np.interp(np.asarray(times, float), np.concatenate([[t[0] - dt[0]], t]),
                     np.concatenate([[0.0], np.cumsum(rate * dt)]))


def bytes_per_step(mon: pd.DataFrame, iface: str, steps: pd.DataFrame) -> dict | None:
    """Bytes the busier direction of `iface` carried per step, counted between the end of the first and of the last
    of `steps` (one rank's records): evaluation pauses in between add their (small) traffic but no steps.
    None when the samples do not span two step ends."""
    if len(mon) < 2:
        return None
    # only the steps that ended while this node's sampler counted (it starts and stops beside its rank)
    steps = steps[steps["wall_time"].between(mon["time"].min(), mon["time"].max())].sort_values("wall_time")
    if len(steps) < 2:
        return None
    ends = steps["wall_time"].to_numpy(float)[[0, -1]]
    sent, recv = (counted_bytes(mon, iface, d, ends) for d in monitor.NET_DIRECTIONS)
    total = max(sent[1] - sent[0], recv[1] - recv[0])
    n = len(steps) - 1
    first, last = int(steps["step"].iloc[0]), int(steps["step"].iloc[-1])
    return {"bytes_per_step": float(total / n), "bytes_counted": float(total), "steps_counted": int(n),
            "bytes_per_step_source": f"the {iface} counters (monitor samples), busier direction, from the end of "
                                     f"step {first} to the end of step {last}"}


def counted_per_step(run: Run, mon: pd.DataFrame, iface: str, o: Options) -> dict:
    """The one estimator of bytes per step (questions 5 and 11, the lab's table and its NIC part): each host's
    busier direction of `iface` counted between its first rank's step ends (bytes_per_step), and their mean over
    the hosts, "bytes_per_step" (the mean, not the max: every host's link carries one ring edge out and one in, so
    the hosts measure one quantity). {} without two step ends inside a host's samples."""
    st = steady_steps(run, o.skip_steps)
    hosts = {}
    for host, df in mon.groupby("host"):
        mine = first_rank_steps(st, host)
        counted = bytes_per_step(df, iface, mine) if not mine.empty else None
        if counted:
            hosts[str(host)] = counted["bytes_per_step"]
    return {"bytes_per_step": float(np.mean(list(hosts.values()))), "by_host": hosts} if hosts else {}


def first_rank_steps(st: pd.DataFrame, host) -> pd.DataFrame:
    """The steady step records of the lowest rank on `host` (its sampler's steps)."""
    mine = st[st["host"].astype(str) == str(host)]
    return mine[mine["rank"] == mine["rank"].min()] if not mine.empty else mine


# --- Q11 step time against network throughput -----------------------------------------------------------------

PAIR_COLUMNS = ["time", "net_Bps", "step_time", "steps"]


def align_steps_to_network(run: Run, skip: int) -> tuple[pd.DataFrame, str | None, str]:
    """Pairs (net_Bps, the busier direction's bytes/s; step_time): each step is matched to the monitor sample whose
    interval holds its end, on the node of the lowest rank; steps sharing a sample are averaged (one pair per sample).

    Used by no notebook's cells (the kit's own and the CLI's)."""
    st = steady_steps(run, skip)
    mon = per_host(run.monitor)
    if st.empty or mon.empty:
        return pd.DataFrame(columns=PAIR_COLUMNS), None, ""
    r0 = st[st["rank"] == st["rank"].min()].sort_values("wall_time")
    host = str(r0["host"].iloc[0])
    m = mon[mon["host"].astype(str) == host] if host in set(mon["host"].astype(str)) else mon
    iface, why = link_iface(run, m)
    if iface is None:
        return pd.DataFrame(columns=PAIR_COLUMNS), None, why
    # one direction, the busier: a full-duplex link's rate holds each way (sent + received is no rate to set beside it)
    m = m.sort_values("time").assign(net_Bps=net_busiest_direction(m, iface))[["time", "net_Bps"]]
    interval = float(m["time"].diff().median()) if len(m) > 1 else 1.0
    merged = pd.merge_asof(r0[["wall_time", "step_time"]].astype(float), m.astype(float), left_on="wall_time",
                           right_on="time", direction="forward", tolerance=1.5 * interval).dropna()
    pairs = merged.groupby("time").agg(net_Bps=("net_Bps", "first"), step_time=("step_time", "mean"),
                                       steps=("step_time", "size")).reset_index()
    return pairs, iface, why


def measure_correlation(run: Run, o: Options) -> tuple[dict, pd.DataFrame]:
    """Pearson r between step time and the link's throughput over the aligned (sample, steps) pairs."""
    pairs, iface, why = align_steps_to_network(run, o.skip_steps)
    if iface is None and why:
        raise AnalysisError(why)
    if len(pairs) < 5:
        raise AnalysisError(f"at least 5 monitor samples overlapping training steps (have {len(pairs)}); needs "
                      f"ranks/rank<R>.jsonl and monitor/*.jsonl from the same run")
    x, y = pairs["net_Bps"].to_numpy(), pairs["step_time"].to_numpy()
    if np.ptp(x) == 0:
        raise AnalysisError(f"variation in network throughput: {iface} carried a constant {x[0]:.0f} B/s while steps "
                      f"ran (a single-process run has no inter-node traffic)")
    if np.ptp(y) == 0:
        raise AnalysisError("variation in step time (every aligned step took the same time)")
    r = float(np.corrcoef(x, y)[0, 1])
    strength = "strong" if abs(r) >= 0.7 else "moderate" if abs(r) >= 0.4 else "weak" if abs(r) >= 0.2 else "no real"
    ev = {"pearson_r": r, "strength": strength, "pairs": int(len(pairs)), "iface": iface, "iface_choice": why,
          "steps_matched": int(pairs["steps"].sum()), "alignment": "each step matched by wall clock to the monitor "
          "sample whose interval contains the step's end; steps in the same sample averaged"}
    return ev, pairs
