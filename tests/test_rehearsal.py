"""The two-VM rehearsal's parts: two namespaces reached over real SSH, the measured link, engines started over
SSH with 2 slots per host, and a short 4-rank run with the data pushed to the host that lacks it.

Needs root, iproute2 and Debian's openssh-server (`apt-get install -y openssh-server iproute2`); skipped otherwise.
See docs/rehearsal.md.
"""
import importlib.util
import os
import socket
import subprocess

import pytest

from nmtkit.rehearsal.netns import DATA_IFACE, TwoHosts, unavailable

_why = unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.skipif(_why is not None, reason=_why or "")]
needs_horovod = pytest.mark.skipif(not importlib.util.find_spec("horovod"),
                                   reason="Horovod is not installed (make setup)")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("rehearsal")


@pytest.fixture(scope="module")
def net(work):
    (work / "node").mkdir()
    with TwoHosts(rate="1gbit", hide=work / "node") as n:
        yield n
    assert not any(h.ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
                   for h in n.hosts), "a namespace survived the teardown"
    assert not n.tmp.exists(), "the temp dir with the keys survived the teardown"


def test_each_host_answers_ssh_with_its_own_name(net, work):
    (work / "node" / "marker").write_text("only on the first host")
    for h in net.hosts:
        r = subprocess.run(["ssh", "-F", str(net.ssh_config), h.name, "hostname; getent hosts $(hostname)"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        name, resolved = r.stdout.split("\n", 1)
        assert name == h.name and resolved.split()[0] == h.data_addr  # Horovod needs the data-link address
    second = net.ssh(net.hosts[1].name, "ls", "-A", str(work / "node")).stdout.split()
    first = net.ssh(net.hosts[0].name, "ls", "-A", str(work / "node")).stdout.split()
    assert "marker" in first and second == []  # the second host lacks the data directory's contents


@pytest.mark.parametrize("rate,mbit", [("1gbit", 1000.0), ("200mbit", 200.0)])
def test_link_measured_within_15_percent_of_tc_rate(net, rate, mbit):
    from nmtkit.rehearsal.link import measure_netns
    a, b = net.hosts
    net.set_rate(rate)
    try:
        m = measure_netns(b.ns, a.ns, b.data_addr, expect_mbit=mbit)
    finally:
        net.set_rate("1gbit")
    assert m["bytes"] == 64 << 20 and m["from"] == a.data_addr
    assert abs(m["mbit_s"] / mbit - 1) <= 0.15, f"{m['mbit_s']:.0f} Mbit/s at tc {rate}"


@pytest.fixture(scope="module")
def cluster(net, work):
    from nmtkit.rehearsal.run import CODE_ROOT, TINY
    from nmtkit.rehearsal.ssh import launcher_traits, start_cluster
    from nmtkit import config
    cfg = config.load("tiny", dict(TINY, **{"data.dir": str(work / "node" / "data"), "train.steps": 4}))
    traits = launcher_traits(net.ssh_config, CODE_ROOT, work / "node" / "ipython")
    c, engines, how = start_cluster(cfg, {h.name: 2 for h in net.hosts}, traits, listen_ip=net.listen_ip,
                                    iface=DATA_IFACE, profile_dir=work / "ipython")
    c.how, c.cfg = how, cfg
    try:
        yield c
    finally:
        if engines is not None:
            engines.stop()
        c.stop()


def test_engines_over_ssh_two_slots_per_host(net, cluster):
    engines = cluster.engines(refresh=True)
    seen = cluster.client[[e.id for e in engines]].apply_sync(socket.gethostname)
    # the engines run in the hosts' namespaces: their own host names and pids, as SSH started them
    assert sorted(seen) == sorted(h.name for h in net.hosts for _ in range(2))
    plan = [(e.slot.rank, e.host, e.slot.local_rank, e.slot.cross_rank) for e in engines]
    a, b = (h.name for h in net.hosts)
    hosts_in_order = [p[1] for p in plan]
    first = hosts_in_order[0]
    other = b if first == a else a
    assert plan == [(0, first, 0, 0), (1, first, 1, 0), (2, other, 0, 1), (3, other, 1, 1)]
    assert all(e.slot.size == 4 and e.slot.local_size == 2 and e.slot.cross_size == 2 for e in engines)
    for e, d in zip(engines, cluster.client[[e.id for e in engines]].apply_sync(os.getpid)):
        assert e.pid == d


def test_link_measured_between_engines_on_two_hosts(net, cluster):
    from nmtkit.rehearsal.link import measure_engines
    engines = cluster.engines()
    a = next(e for e in engines if e.host == net.hosts[0].name)
    b = next(e for e in engines if e.host == net.hosts[1].name)
    m = measure_engines(cluster.client, b.id, a.id, net.hosts[1].data_addr, nbytes=32 << 20, expect_mbit=1000)
    assert m["host"] == b.host and m["from"] == net.hosts[0].data_addr
    assert abs(m["mbit_s"] / 1000 - 1) <= 0.15, m


@needs_horovod
def test_short_4_rank_run_with_the_data_pushed(net, cluster, work):
    from nmtkit import runs
    from nmtkit.data.prepare import prepare
    from nmtkit.rehearsal.run import remote_sha, sha256_dir
    data = work / "node" / "data"
    prepare(cluster.cfg, progress=False)
    second = net.hosts[1].name
    assert remote_sha(net, second, data) == "missing"
    table = cluster.preflight(data)
    assert sorted(set(table["host"])) == sorted(h.name for h in net.hosts) and table["data_ok"].all()
    assert remote_sha(net, second, data) == sha256_dir(data)  # pushed through the engines, checked over SSH
    before = [net.counters(i) for i in range(2)]
    results = cluster.launch(cluster.cfg, work / "run", data_dir=data, preflight=False).wait(timeout=400)
    after = [net.counters(i) for i in range(2)]
    summaries = [r["value"] for r in results]
    assert [s["status"] for s in summaries] == ["finished"] * 4
    assert len({s["weights_checksum"] for s in summaries}) == 1
    assert sorted(r["host"] for r in results) == sorted(h.name for h in net.hosts for _ in range(2))
    logs = [p.name for p in (work / "run" / runs.MONITOR_DIR).glob("*.jsonl")]
    assert all(any(x.startswith(h.name) for x in logs) for h in net.hosts), logs
    # every step's gradients crossed the data link: at least the ring's share per host per step
    from nmtkit.rehearsal.run import ring_bytes
    bound = ring_bytes(summaries[0]["params"], 4) * cluster.cfg.train.steps
    for b, a in zip(before, after):
        assert a["tx_bytes"] - b["tx_bytes"] >= bound
