"""The measured link (nmtkit.cluster.link) and preflight's use of it, without a cluster: the engines are stand-ins
whose client runs the engine-side functions in this process (threads), so the transfers are real, over loopback.
"""
import threading
from types import SimpleNamespace

import pytest

from nmtkit.cluster import link
from nmtkit.cluster.preflight import link_status, measure_link, preflight_table
from nmtkit.errors import ClusterError


class _Async:
    def __init__(self, fn, args):
        self.out, self.err = None, None
        self.thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self.thread.start()

    def _run(self, fn, args):
        try:
            self.out = fn(*args)
        except BaseException as e:  # noqa: BLE001  re-raised by get(), like ipyparallel's AsyncResult
            self.err = e

    def get(self, timeout=None):
        self.thread.join(timeout)
        if self.err is not None:
            raise self.err
        return self.out


class _View:
    def apply_sync(self, fn, *args):
        return fn(*args)

    def apply_async(self, fn, *args):
        return _Async(fn, args)


class _Client:
    def __getitem__(self, engine_id):
        return _View()


def _engines(hosts):
    engines = [SimpleNamespace(id=10 + r, host=h, slot=SimpleNamespace(rank=r)) for r, h in enumerate(hosts)]
    facts = [{"rank": r, "host": h, "node": h, "host_addr": "127.0.0.1"} for r, h in enumerate(hosts)]
    return engines, facts


def test_one_host_has_no_link_to_measure():
    engines, facts = _engines(["vm1", "vm1"])  # two engines, one machine: nothing crosses a link
    assert measure_link(_Client(), engines, facts) is None
    assert set(preflight_table(facts)["link"]) == {"one host: no link to measure"}


def test_two_hosts_measured_with_who_and_when():
    engines, facts = _engines(["vm1", "vm1", "vm2", "vm2"])
    m = measure_link(_Client(), engines, facts, tries=2, nbytes=8 << 20)
    # rank 0's host sends to the first engine of the other host; loopback is fast but finite
    assert (m["from"], m["to"]) == ("vm1", "vm2") and m["mbit_s"] > 10 and m["at"].endswith("Z")
    assert len(m["pairs"]) == 1 and m["pairs"][0]["bytes"] == 8 << 20 and len(m["pairs"][0]["tries_mbit_s"]) >= 1
    assert set(preflight_table(facts, m)["link"]) == {f"{m['mbit_s']:.0f} Mbit/s vm1 -> vm2"}
    status = link_status(m)  # what Cluster.launch merges into run.json for question 5
    assert status["link_measured_mbit_s"] == m["mbit_s"]
    assert status["link_measured"]["from"] == "vm1" and status["link_measured"]["at"] == m["at"]


def test_a_link_that_cannot_be_measured_names_both_ends():
    engines, facts = _engines(["vm1", "vm2"])
    facts[1]["host_addr"] = "192.0.2.1"  # TEST-NET-1: not an address of this machine, so listen() cannot bind
    with pytest.raises(ClusterError, match=r"cannot measure the link vm1 -> vm2 \(192\.0\.2\.1\)"):
        measure_link(_Client(), engines, facts, tries=1, nbytes=1 << 20)


def test_counters_and_bytes_per_step():
    samples = [(0.0, 0, 0), (1.0, 1000, 10), (2.0, 3000, 20), (4.0, 7000, 40)]
    assert link.counter_at(samples, 1.5) == 2000 and link.counter_at(samples, 3.0, col=2) == 30
    with pytest.raises(ValueError, match="no counter samples around"):
        link.counter_at(samples, 5.0)
    t = link.steady_traffic(samples, {1: 0.5, 2: 1.0, 3: 2.0, 4: 4.0}, first=2)
    assert t == {"bytes_per_step": 3000.0, "step_time_s": 1.5, "steps": "3..4"}
    from nmtkit.ring import ring_bytes
    assert ring_bytes(1000, 4) == 6000 and ring_bytes(1000, 4, 2) == 3000 and ring_bytes(10, 1) == 0


def test_nic_counters_see_a_loopback_transfer():
    with pytest.raises(ValueError, match="no network interface 'nope0'"):
        link.NicCounters("nope0")
    lo = next(n for n in link.NicCounters.interfaces() if n == "lo" or n.startswith("lo"))
    with link.NicCounters(lo, interval=0.02) as c:
        port = link.listen("127.0.0.1")
        rx = _Async(link.receive, (port, 4 << 20))
        link.send("127.0.0.1", port, 4 << 20)
        assert rx.get(30)["bytes"] == 4 << 20
    assert c.samples[-1][1] - c.samples[0][1] >= 4 << 20


# --- which NIC to read: the one to the peers, never loopback for remote nodes ----------------------------------

def test_the_link_cell_reads_the_nic_that_routes_to_a_peer_not_loopback(monkeypatch):
    from horovod.runner.common.util.hosts import HostInfo

    from nmtkit.cluster import plan
    from nmtkit.cluster.launchers import make_launcher
    hosts = [HostInfo("vm1", 2), HostInfo("vm2", 2)]
    ssh, local = make_launcher("ssh", hosts), make_launcher("local", hosts)
    monkeypatch.setattr(plan.socket, "gethostbyname", lambda h: {"vm1": "10.0.0.5", "vm2": "10.0.0.6"}[h])
    monkeypatch.setattr(plan, "iface_for", lambda addr: "ens5" if addr.startswith("10.0.0.") else "lo")
    assert plan.link_iface("", hosts, ssh) == "ens5"            # notebook 03's compression cell on two VMs
    assert plan.link_iface("eth1", hosts, ssh) == "eth1"        # cluster.iface wins
    assert plan.link_iface("", hosts, local) == "lo"            # local engines posing as nodes
    # the cell itself passes no iface: compression_trials asks link_iface with the cluster's own settings
    seen = {}
    cluster = SimpleNamespace(iface="", hosts=hosts, backend=ssh)

    class Stop(Exception):
        pass

    def nic(iface, interval=0.1):
        seen["iface"] = iface
        raise Stop
    monkeypatch.setattr(link, "NicCounters", nic)
    with pytest.raises(Stop):
        link.compression_trials(cluster, None, "/nonexistent")
    assert seen["iface"] == "ens5"


def test_nccl_debug_reaches_every_engine(monkeypatch):
    from nmtkit.cluster import plan
    slot = plan.assign_slots(["node0", "node1"])[1]
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    assert "NCCL_DEBUG" not in plan.rank_env(slot, addr="10.0.0.5", port=1, iface="ens5", nccl=True)
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    env = plan.rank_env(slot, addr="10.0.0.5", port=1, iface="ens5", nccl=True)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_SOCKET_IFNAME"] == "ens5"
