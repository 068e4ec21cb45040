"""Preflight: the facts every engine reports (gathered through remote.node_facts) and the decision on them.

The driver compares the nodes before training: same software (nmtkit source, TensorFlow, Horovod and its build),
the same prepared data, a reachable rendezvous address, a host name that does not resolve to loopback on a
multi-host job. Each problem is one sentence naming the rank, the node and the difference. With two hosts or more
it also measures the link between them (measure_link: a timed transfer between engines, nmtkit.cluster.link), the
figure question 5 judges the gradient traffic against; one host has no link to measure.
"""
from __future__ import annotations

import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd

import nmtkit.cluster.link as link
from nmtkit.cluster.remote import DATA_MARKERS, node_facts, write_file_chunk
from nmtkit.errors import ClusterError
from nmtkit.runs import workspace

TABLE_COLUMNS = ["node", "host", "host_addr", "engine", "pid", "python", "nmtkit", "tensorflow", "tf_cuda", "horovod",
                 "horovod_build", "gpus", "data_ok", "data_dir", "rendezvous_ok", "iface", "link"]
SAME_EVERYWHERE = (("nmtkit", "nmtkit"), ("nmtkit_source", "nmtkit source (sha256)"), ("tensorflow", "TensorFlow"),
                   ("horovod", "Horovod"), ("horovod_build", "Horovod build"), ("python", "Python"))


@contextmanager
def reachability_listener(addr: str) -> Iterator[tuple[str, int]]:
    """A throwaway TCP listener on the driver's address: can every node open a connection to it?"""
    with socket.create_server((addr, 0)) as server:
        yield addr, server.getsockname()[1]


def gather_facts(client, engines: list, data_dir: str | None, rendezvous: tuple[str, int] | None,
                 timeout: float) -> list[dict]:
    """node_facts() from every engine (in the order given), with the driver's `rank`, `node` and `engine` added.
    An engine that cannot even answer becomes a fact with an `error`."""
    pending = [client[e.id].apply_async(node_facts, data_dir, rendezvous) for e in engines]
    facts = []
    for e, job in zip(engines, pending):
        try:
            f = job.get(timeout=timeout)
        except Exception as err:  # noqa: BLE001  a node that cannot answer is a preflight problem, not a crash
            f = {"host": e.host, "pid": e.pid, "error": f"{type(err).__name__}: {err}"}
        f.update(rank=e.slot.rank, node=e.node, engine=e.id)
        facts.append(f)
    return facts


def preflight_problems(facts: list[dict], iface: str = "") -> list[str]:
    """What would break training, one sentence per problem naming the node and the difference; [] when fine.

    `facts`: node_facts() dicts, one per rank in rank order (the first is the reference), with `node` and `rank`;
    `iface`: cluster.iface, which every node must have.
    """
    if not facts:
        return ["no engines: start the cluster first"]
    ref = facts[0]
    problems = []
    for f in facts:
        if f.get("error"):
            problems.append(f"{_who(f)}: {f['error']}")
        else:
            siblings = [g["pid"] for g in facts if g.get("host") == f.get("host") and g.get("pid") is not None]
            problems += [f"{_who(f)}: {p}" for p in _node_problems(f, ref, siblings)]
            if iface and f.get("ifaces") and iface not in f["ifaces"]:
                problems.append(f"{_who(f)}: cluster.iface={iface!r} is no network interface there (it has "
                                f"{', '.join(f['ifaces'])}); set cluster.iface to the NIC that reaches the other nodes")
    return problems


def _who(f: dict) -> str:
    return f"rank {f['rank']} on {f['node']}" + (f" ({f['host']})" if f["host"] != f["node"] else "")


HELD_SHARE = 0.25  # of a GPU's memory held by another process before the job starts: too much to train beside it


def held_gpu_memory(gpus: list[dict], engine_pids=()) -> list[str]:
    """One problem per GPU whose memory other processes hold (nmtkit.gpus.gpu_holders), naming them and the fix.
    `engine_pids`: this cluster's engines on that host, which hold their GPU from one launch to the next (TensorFlow
    never gives memory back): a sibling engine is the job's own, not a stranger in its way."""
    out, ours = [], set(engine_pids)
    for g in gpus:
        others = [p for p in g["held_by"] if p["pid"] not in ours]
        held = sum(p["mib"] for p in others)
        if others and held >= HELD_SHARE * g["total_mib"]:
            who = ", ".join(f"pid {p['pid']} ({p['name']}) {p['mib'] / 1024:.1f} GiB" for p in others)
            out.append(f"GPU {g['gpu']}: {held / 1024:.1f} of {g['total_mib'] / 1024:.1f} GiB held by {who}; "
                       f"TensorFlow never gives memory back: shut down that kernel (notebook 02's: Kernel > Shut "
                       f"Down Kernel) or stop that process, then launch again")
    return out


def _node_problems(f: dict, ref: dict, engine_pids=()) -> list[str]:
    out = []
    if f is not ref:
        for key, label in SAME_EVERYWHERE:
            if f.get(key) != ref.get(key):
                out.append(f"{label} {f.get(key)} differs from {ref.get(key)} on {_who(ref)}; install the same "
                           f"version on every node")
    if f.get("horovod") is None:
        out.append(f"Horovod is not importable there ({f.get('horovod_error')}); install it (scripts/setup.sh) on "
                   f"that node")
    elif "gloo" not in str(f.get("horovod_build", "")).split(","):
        out.append("Horovod was built without Gloo: rebuild it with HOROVOD_WITH_GLOO=1 (see scripts/setup.sh); "
                   "nmtkit starts Horovod through Gloo's rendezvous, not mpirun")
    if not f.get("data_ok"):
        missing = ", ".join(f.get("data_missing") or DATA_MARKERS)
        out.append(f"prepared data missing in {f.get('data_dir')} (no {missing}); run prepare(cfg) there or let "
                   f"preflight copy it (push_data=True)")
    elif f is not ref and ref.get("data_ok") and f.get("data_sha") != ref.get("data_sha"):
        out.append(f"prepared data differs from {_who(ref)} (manifest sha256 {str(f.get('data_sha'))[:12]} vs "
                   f"{str(ref.get('data_sha'))[:12]}); prepare it with the same config everywhere")
    if f.get("rendezvous_ok") is False:
        out.append(f"cannot reach the rendezvous server at {f.get('rendezvous')} ({f.get('rendezvous_error')}); "
                   f"open that port from the node to the driver, or choose the address with cluster.listen")
    out += held_gpu_memory(f.get("gpu_memory") or [], engine_pids)
    if f.get("gpus", 0) and not f.get("nccl_built"):
        out.append(f"has {f['gpus']} GPU(s) but Horovod was built without NCCL; rebuild with "
                   f"HOROVOD_GPU_OPERATIONS=NCCL (gradients would go through host memory)")
    if (f.get("rendezvous") and not f["rendezvous"].startswith("127.")
            and str(f.get("host_addr", "")).startswith("127.")):
        out.append(f"its host name {f['host']} resolves to {f['host_addr']} there; Horovod 0.28.1 binds part of its "
                   f"Gloo traffic to that address (it ignores HOROVOD_GLOO_IFACE for process sets), so the other "
                   f"nodes cannot connect: map {f['host']} to the node's address on the training network in "
                   f"/etc/hosts")
    if f is not ref and f.get("gpus", 0) != ref.get("gpus", 0):
        out.append(f"sees {f.get('gpus', 0)} GPU(s) but {_who(ref)} sees {ref.get('gpus', 0)}")
    return out


def measure_link(client, engines: list, facts: list[dict], *, tries: int = 5, nbytes: int = link.NBYTES) -> dict | None:
    """Throughput from rank 0's host to the first engine of every other host (to the address its host name
    resolves to: where Horovod's Gloo traffic goes); None with one host, where there is no link to measure.
    Returns the slowest pair's figure with who -> who and when, and every pair; a transfer that fails is a
    ClusterError (Gloo needs the same TCP ports between the nodes)."""
    first: dict[str, object] = {}
    for e in engines:  # rank order: the first host is rank 0's
        first.setdefault(e.host, e)
    if len(first) < 2:
        return None
    addr = {f["rank"]: f.get("host_addr") for f in facts}
    src, *dests = first.values()
    pairs = []
    for d in dests:
        try:
            m = link.measure_engines(client, d.id, src.id, addr[d.slot.rank], nbytes, tries=tries)
        except Exception as err:  # noqa: BLE001  one sentence naming both ends, not a remote traceback
            raise ClusterError(f"cannot measure the link {src.host} -> {d.host} ({addr[d.slot.rank]}): "
                                 f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}; open TCP "
                                 f"ports between the nodes (Horovod's Gloo needs them too)") from None
        pairs.append({"from": src.host, "to": d.host, "to_addr": addr[d.slot.rank], "mbit_s": round(m["mbit_s"], 1),
                      "bytes": m["bytes"], "tries_mbit_s": m["tries"]})
    slowest = min(pairs, key=lambda p: p["mbit_s"])
    return {"mbit_s": slowest["mbit_s"], "from": slowest["from"], "to": slowest["to"],
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pairs": pairs}


def link_status(measured: dict) -> dict:
    """The run.json fields for a measured link (RunDir.record(**link_status(m))); question 5 reads them."""
    return {"link_measured_mbit_s": measured["mbit_s"],
            "link_measured": {k: measured[k] for k in ("from", "to", "at", "pairs")}}


def _link_cell(host: str, hosts: set, measured: dict | None) -> str:
    if len(hosts) < 2:
        return "one host: no link to measure"
    if measured is None:
        return "not measured"
    p = next((p for p in measured["pairs"] if p["to"] == host), None) or \
        next(p for p in measured["pairs"] if p["mbit_s"] == measured["mbit_s"])
    return f"{p['mbit_s']:.0f} Mbit/s {p['from']} -> {p['to']}"


def preflight_table(facts: list[dict], measured: dict | None = None) -> pd.DataFrame:
    """The per-rank facts as a DataFrame indexed by rank (what the notebook shows); the `link` column: the link
    measured to this rank's host (rank 0's host: the slowest pair), or why there is none."""
    hosts = {f.get("host") for f in facts}
    rows = [{c: f.get(c) for c in TABLE_COLUMNS}
            | {"rank": f["rank"], "link": _link_cell(f.get("host"), hosts, measured)} for f in facts]
    for row in rows:  # paths inside the workspace print the same on every machine (and in committed notebooks)
        row["data_dir"] = _under_workspace(row["data_dir"])
    return pd.DataFrame(rows, columns=["rank"] + TABLE_COLUMNS).set_index("rank")


def _under_workspace(path: str | None) -> str | None:
    if not path:
        return path
    try:
        return "<workspace>/" + str(Path(path).resolve().relative_to(workspace()))
    except ValueError:
        return path


def copy_to_node(view, src: str | Path, dest: str, chunk: int = 8 << 20) -> int:
    """Copy the prepared data files of `src` to `dest` on one engine's node (`view`: the engine's DirectView),
    each file written whole and renamed into place there (write_file_chunk). Returns the bytes sent."""
    total = 0
    for p in sorted(Path(src).iterdir()):
        if not p.is_file() or p.name.startswith("."):
            continue
        size = p.stat().st_size
        with open(p, "rb") as f:
            offset = 0
            while True:
                block = f.read(chunk)
                last = offset + len(block) >= size
                view.apply_sync(write_file_chunk, str(Path(dest) / p.name), block, offset, size if last else None)
                offset += len(block)
                if last:
                    break
        total += size
    return total
