"""The rank plan: host list, Horovod slots, each rank's environment, and the addresses the driver listens on.

Built on horovod.runner's own helpers, so a rank started here sees exactly what `horovodrun` would have given it:
`parse_hosts`/`get_host_assignments` (the slots) and gloo_run's `create_slot_env_vars`/`create_run_env_vars` (the
HOROVOD_* variables, and NCCL_SOCKET_IFNAME next to the Gloo interface). Pure Python: no TensorFlow here.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from typing import Callable

import psutil
from horovod.runner.common.util.hosts import HostInfo, SlotInfo, get_host_assignments
from horovod.runner.common.util.hosts import parse_hosts as horovod_parse_hosts
from horovod.runner.gloo_run import create_run_env_vars, create_slot_env_vars

from nmtkit.errors import ClusterError

LOOPBACK = "127.0.0.1"


def parse_hosts(text: str) -> list[HostInfo]:
    """'10.0.0.5:2,10.0.0.6:2' -> Horovod's HostInfo list; a host without ':n' has one slot; '' -> []."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    for item in items:
        name, _, count = item.rpartition(":") if ":" in item else (item, "", "1")
        if not name or not count.isdigit() or int(count) < 1:
            raise ClusterError(f"cluster.hosts: bad entry {item!r}: expected host:slots, e.g. 10.0.0.5:2")
    if not items:
        return []
    hosts = horovod_parse_hosts(",".join(i if ":" in i else f"{i}:1" for i in items))
    if len({h.hostname for h in hosts}) != len(hosts):
        raise ClusterError(f"cluster.hosts: {text!r} names a host twice; give each host once with its slot count")
    return hosts


@dataclass
class Engine:
    """One engine as the driver sees it (ordered by rank once a plan exists)."""
    id: int
    host: str          # the real host name
    node: str          # the host name Horovod sees (a logical nodeN for local engines posing as nodes)
    pid: int
    slot: SlotInfo
    device_index: int = 0  # its index among the engines of its real host: the GPU it pins
    gpus_bound: bool = False  # a scheduler gave it GPUs of its own (CUDA_VISIBLE_DEVICES): it pins the first


def assign_slots(node_of_engine: list[str]) -> list[SlotInfo]:
    """The Horovod slot of each engine (same order as the input), from the node each engine runs on.

    Horovod's get_host_assignments plans the nodes in the order they first appear, each with as many slots as it
    has engines; a node's engines then take that node's slots in engine order.

    Introduced in notebook 03_horovod_multinode.
    """
    counts: dict[str, int] = {}
    for node in node_of_engine:
        counts[node] = counts.get(node, 0) + 1
    plan = get_host_assignments([HostInfo(node, n) for node, n in counts.items()], len(node_of_engine))
    free: dict[str, list[SlotInfo]] = {}
    for slot in plan:
        free.setdefault(slot.hostname, []).append(slot)
    return [free[node].pop(0) for node in node_of_engine]


def bound_hosts(hosts: list[str], visible: list[str | None], uuids: list | None = None) -> set[str]:
    """The hosts where a scheduler bound each engine its own GPUs: every engine of the host sees a non-empty list,
    and either none shared (Slurm's --gpus-per-task gives every task a different CUDA_VISIBLE_DEVICES) or, where
    the lists are alike (ConstrainDevices=yes: each task calls its own GPU 0), the GPUs each can open (`uuids`,
    per engine, from NVML) are different ones."""
    uuids = uuids or [None] * len(hosts)
    sets: dict[str, list[set]] = {}
    opens: dict[str, list[set]] = {}
    for h, v, u in zip(hosts, visible, uuids):
        sets.setdefault(h, []).append(set(filter(None, (v or "").split(","))))
        opens.setdefault(h, []).append(set(u or ()))
    return {h for h, s in sets.items() if all(s) and (_disjoint(s) or (all(opens[h]) and _disjoint(opens[h])))}


def _disjoint(sets: list[set]) -> bool:
    return sum(map(len, sets)) == len(set().union(*sets))


def device_indices(hosts: list[str], visible: list[str | None], uuids: list | None = None) -> list[int]:
    """The GPU each engine pins, as an index into the GPUs it sees (same order as the input): 0, its first visible
    one, on bound_hosts(); else the kit's own index, the engine's place among its host's engines, which all see the
    same GPUs (nothing bound, or one list shared by all of them)."""
    bound, index, per_host = bound_hosts(hosts, visible, uuids), [], {}
    for h in hosts:
        per_host[h] = per_host.get(h, -1) + 1
        index.append(0 if h in bound else per_host[h])
    return index


CPU_CYCLE_MS = 10.0  # HOROVOD_CYCLE_TIME on CPU (Gloo) ranks; why: cycle_time_ms below


def cycle_time_ms(nccl: bool, configured: float = 0.0) -> float | None:
    """HOROVOD_CYCLE_TIME for a rank: cluster.cycle_time_ms when set (> 0); else CPU_CYCLE_MS where the allreduce
    runs on CPUs over Gloo, where each cycle's negotiation takes CPU from the training on the same cores (a
    longer cycle negotiates less often; bench/README.md has what Horovod's threads took at 1 and 10 ms); None on
    NCCL ranks (Horovod's own 1 ms: GPU steps are short and the CPU is free)."""
    if configured > 0:
        return configured
    return None if nccl else CPU_CYCLE_MS


def rank_env(slot: SlotInfo, *, addr: str, port: int, iface: str, nccl: bool = False, gloo_timeout: int = 60,
             device_index: int | None = None, cycle_ms: float = 0.0, gpus_bound: bool = False) -> dict[str, str]:
    """Everything a rank needs in os.environ before hvd.init(): what horovodrun's Gloo launcher exports.

    Gloo is the controller and carries CPU tensors (no MPI: no mpirun, no SSH between nodes). `nccl`: Horovod was
    built with NCCL and this rank has a GPU, so GPU tensors go through NCCL (recorded as HOROVOD_GPU_OPERATIONS);
    NCCL_SOCKET_IFNAME keeps NCCL's own sockets on the Gloo interface, as horovodrun does.

    Introduced in notebook 03_horovod_multinode.
    """
    env = {"TF_USE_LEGACY_KERAS": "1"}
    env.update(create_slot_env_vars(slot))  # HOROVOD_HOSTNAME must equal the host in the rendezvous server's plan
    env.update(create_run_env_vars(addr, [iface], str(port)))
    env.update({
        # How long Gloo waits for a peer (rendezvous and every collective): a dead rank frees the others after it.
        "HOROVOD_GLOO_TIMEOUT_SECONDS": str(gloo_timeout),
        # The GPU this rank pins: its local rank on the physical machine (differs from HOROVOD_LOCAL_RANK only
        # when local engines pose as nodes on a multi-GPU machine).
        "NMTKIT_DEVICE_INDEX": str(slot.local_rank if device_index is None else device_index),
    })
    if gpus_bound:  # its GPUs are its own: the other ranks of its host are not on them (remote.pin_args)
        env["NMTKIT_GPUS_BOUND"] = "1"
    if nccl:
        env["HOROVOD_GPU_OPERATIONS"] = "NCCL"
    # every NCCL_* setting of the driver (NCCL_DEBUG, NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1 a VM may need, ...)
    # reaches every rank, SSH- and Slurm-started engines too, which do not inherit the driver's environment
    env.update({k: v for k, v in os.environ.items() if k.startswith("NCCL_") and v})
    cycle = cycle_time_ms(nccl, cycle_ms)
    if cycle is not None:
        env["HOROVOD_CYCLE_TIME"] = f"{cycle:g}"
    return env


# --- where the driver listens ----------------------------------------------------------------------------------

ANY_ADDRESSES = ("", "*", "0.0.0.0", "::")  # the usual spellings; ipaddress catches the rest (0:0:0:0:0:0:0:0, ::0)


def check_listen(addr: str) -> str:
    """Refuse every any-address (0.0.0.0, ::, [::], 0:0:0:0:0:0:0:0, '', '*'): the controller and the rendezvous
    store would be open on every network. Returns the address (without brackets or spaces)."""
    text = addr.strip().strip("[]")
    try:
        unspecified = text in ANY_ADDRESSES or ipaddress.ip_address(text).is_unspecified
    except ValueError:
        unspecified = False  # a host name: resolved by whoever binds it
    if unspecified:
        raise ClusterError(f"refusing to listen on every interface ({addr!r}): set cluster.listen (or pass "
                           f"listen_ip=) to the address of the network that reaches the nodes, e.g. 10.0.0.2")
    return text


def controller_ip(hosts: list[str], route_src: Callable[[str], str] | None = None) -> str:
    """Where the controller and the rendezvous server listen: loopback for local engines, else the one local
    address that routes to every remote host."""
    if not hosts:
        return LOOPBACK
    route_src = route_src or source_address
    sources = {h: route_src(h) for h in hosts}
    distinct = sorted(set(sources.values()))
    if len(distinct) != 1:
        detail = ", ".join(f"{h} via {s}" for h, s in sources.items())
        raise ClusterError(f"the remote hosts are reached through different local addresses ({detail}); "
                           f"set cluster.listen (or pass listen_ip=) to the address on the network that reaches "
                           f"them all")
    return distinct[0]


def source_address(host: str) -> str:
    """The local address this machine uses to reach `host` (no packet is sent: a UDP connect picks the route)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((socket.gethostbyname(host), 9))
            return s.getsockname()[0]
    except OSError as e:
        raise ClusterError(f"no route from this machine to {host}: {e}; check the host list (cluster.hosts)") from None


def check_iface(iface: str) -> str:
    """`iface` if this machine has a network interface of that name, else one ClusterError line naming it and the
    ones there are (before any engine starts: Gloo would fail to bind, and the engines die without saying why)."""
    have = sorted(psutil.net_if_addrs())
    if iface and iface not in have:
        raise ClusterError(f"cluster.iface={iface!r}: no network interface of that name on this machine (it has "
                           f"{', '.join(have)}); set --set cluster.iface=<one of them>, or leave it empty to detect it")
    return iface


def link_iface(iface: str, hosts: list, launcher) -> str:
    """The interface that carries a cluster's traffic to the other nodes, the one to sample for its bytes:
    cluster.iface when set, else the one that routes to the first remote host; loopback when the "nodes" are
    local engines. Never lo for remote nodes: under NCCL, ranks within a node do not use the network at all."""
    if iface:
        return iface
    remote = launcher.remote_hosts(hosts)  # a cluster.launchers.Launcher: none for local engines
    if not remote:
        return "lo"
    try:
        return iface_for(socket.gethostbyname(remote[0])) or "lo"
    except OSError as e:
        raise ClusterError(f"cluster.hosts: {remote[0]} does not resolve ({e}); set cluster.iface to the NIC that "
                           f"reaches the other nodes") from None


def iface_for(addr: str) -> str:
    """The network interface this machine would use to reach `addr` (the one Gloo should bind to). An address of
    this machine's own NIC gives that NIC, not the `lo` the kernel routes it through: the driver's VM is the first
    host of every documented layout, and its ranks must bind where the other nodes reach them."""
    holder = _holding(addr) if not addr.startswith("127.") else None
    if holder:
        return holder
    try:
        out = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True, timeout=5).stdout
        m = re.search(r"\bdev (\S+)", out)
        if m:
            return m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    # without iproute2: the interface holding the source address
    src = LOOPBACK if addr.startswith("127.") else source_address(addr)
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == src for a in addrs):
            return name
    return "lo" if addr.startswith("127.") else ""


def _holding(addr: str) -> str | None:
    """The interface other than loopback holding `addr`, None when no interface here holds it."""
    for name, addrs in psutil.net_if_addrs().items():
        if name != "lo" and any(a.address == addr for a in addrs):
            return name
    return None

