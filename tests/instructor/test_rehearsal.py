"""The two-VM rehearsal's parts: two namespaces reached over real SSH, the measured link, engines started over
SSH with 2 slots per host (Cluster(hosts=..., launcher="ssh")), a short 4-rank run with the data pushed to the host
that lacks it and checked by sha256, and a kill -9 of a remote engine: the error names the rank and host within
60 s and the relaunch resumes from the checkpoint on fresh engines. One network and one cluster for the module.

Needs root, iproute2 and Debian's openssh-server (`apt-get install -y openssh-server iproute2`); skipped otherwise.
See docs/rehearsal.md.
"""
import importlib.util
import os
import socket
import subprocess
import time

import pytest

from tools.rehearsal.netns import DATA_IFACE, TwoHosts, unavailable

_why = unavailable()
pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.netns,
              pytest.mark.skipif(_why is not None, reason=_why or "")]
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
    from tools.rehearsal.link import measure_netns
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
    from nmtkit import config
    from tools.rehearsal.run import CODE_ROOT, TINY
    from tools.rehearsal.ssh import launcher_traits, start_cluster
    # the rehearsal's model (d_model 256, so gradients dominate the link's bytes) at a quarter of its width: the
    # tests check where bytes go and who runs, not the fp16 ratio, and a smaller model traces and steps faster
    small = {"model.d_model": 64, "model.d_ff": 128, "model.num_heads": 2}
    cfg = config.load("tiny", dict(TINY, **small, **{"data.dir": str(work / "node" / "data"), "train.steps": 4}))
    traits = launcher_traits(net.ssh_config, CODE_ROOT, work / "node" / "ipython")
    c, how = start_cluster(cfg, {h.name: 2 for h in net.hosts}, traits, listen_ip=net.listen_ip, iface=DATA_IFACE,
                           profile_dir=work / "ipython")
    c.how, c.cfg = how, cfg
    try:
        yield c
    finally:
        c.stop()


def _plan(engines):
    """(rank, host, local rank, cross rank) per engine, and the hosts in rank order."""
    return [(e.slot.rank, e.host, e.slot.local_rank, e.slot.cross_rank) for e in engines]


def _assert_two_per_host(net, engines):
    a, b = (h.name for h in net.hosts)
    first = engines[0].host
    other = b if first == a else a
    assert _plan(engines) == [(0, first, 0, 0), (1, first, 1, 0), (2, other, 0, 1), (3, other, 1, 1)]
    assert all(e.slot.size == 4 and e.slot.local_size == 2 and e.slot.cross_size == 2 for e in engines)


def test_engines_over_ssh_two_slots_per_host(net, cluster):
    # nmtkit.cluster's own launcher="ssh" path started them: ipyparallel's SSH engine set, one per start
    assert cluster.launcher == "ssh" and cluster.how.startswith("nmtkit.cluster launcher=ssh")
    assert {type(s).__name__ for s in cluster._ipp.engines.values()} == {"SSHEngineSetLauncher"}
    engines = cluster.engines(refresh=True)
    seen = cluster.client[[e.id for e in engines]].apply_sync(socket.gethostname)
    # the engines run in the hosts' namespaces: their own host names and pids, as SSH started them
    assert sorted(seen) == sorted(h.name for h in net.hosts for _ in range(2))
    _assert_two_per_host(net, engines)
    for e, d in zip(engines, cluster.client[[e.id for e in engines]].apply_sync(os.getpid)):
        assert e.pid == d


def test_link_measured_between_engines_on_two_hosts(net, cluster):
    from tools.rehearsal.link import measure_engines
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
    from tools.rehearsal.probes import dir_sha as sha256_dir
    from tools.rehearsal.run import remote_sha
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
    summaries = [r.value for r in results]
    assert [s["status"] for s in summaries] == ["finished"] * 4
    assert len({s["weights_checksum"] for s in summaries}) == 1
    assert sorted(r.host for r in results) == sorted(h.name for h in net.hosts for _ in range(2))
    logs = [p.name for p in (work / "run" / runs.MONITOR_DIR).glob("*.jsonl")]
    assert all(any(x.startswith(h.name) for x in logs) for h in net.hosts), logs
    # every step's gradients crossed the data link: at least the ring's share per host per step
    from nmtkit.ring import ring_bytes
    bound = ring_bytes(summaries[0]["params"], 4) * cluster.cfg.train.steps
    for b, a in zip(before, after):
        assert a["tx_bytes"] - b["tx_bytes"] >= bound


@needs_horovod
def test_remote_kill_named_within_60_s_and_the_relaunch_resumes(net, cluster, work):
    from nmtkit import runs
    from nmtkit.data.prepare import prepare
    from nmtkit.errors import RankFailedError
    from nmtkit.files import read_jsonl
    from tools.rehearsal.run import last_checkpoint
    data, run = work / "node" / "data", work / "run"
    if not (data / "manifest.json").exists():  # run on its own (-k): the short run's test prepared it
        prepare(cluster.cfg, progress=False)
    victim = [e for e in cluster.engines() if e.host == net.hosts[1].name][-1]
    job = cluster.launch(cluster.cfg.with_overrides({"train.steps": 10_000}), run, data_dir=data)
    # kill once the job is in train() (rank 0 wrote run.json "running"), before its first step: the kill path is
    # the same mid-run (the rehearsal kills after a checkpoint) and the test saves the first step's trace (~1 min)
    deadline = time.time() + 300
    while runs.read_status(run).get("total_steps") != 10_000 or runs.read_status(run).get("status") != "running":
        job.check()
        assert time.time() < deadline, job.progress().to_string()
        time.sleep(0.3)
    net.ssh(victim.host, "kill", "-9", str(victim.pid))
    t0 = time.time()
    with pytest.raises(RankFailedError) as err:
        job.wait(timeout=60)  # a hang would raise TimeoutError instead
    seconds = time.time() - t0
    print(f"kill -9 over SSH -> RankFailedError in {seconds:.1f} s")
    assert seconds < 60 and f"rank {victim.slot.rank} on host {victim.host}" in str(err.value)
    assert runs.read_status(run)["status"] == "failed"
    # the other ranks are released at once (killed through their nannies); no engine restart before the error
    while {e.id for e in job.engines} & set(cluster.client.ids):
        assert time.time() < t0 + 60, "the job's other engines are still registered a minute after the kill"
        time.sleep(0.2)
    assert cluster.ids == []
    ckpt = last_checkpoint(run)
    assert ckpt > 0, "no checkpoint to resume from: the short run's test writes it (run the whole module)"
    # no final evaluation (4 ranks tracing the decoder): what is checked is the resume and the fresh engines
    results = cluster.launch(cluster.cfg.with_overrides({"train.steps": ckpt + 2, "eval.at_end": False}), run,
                             data_dir=data, preflight=False).wait(timeout=600)
    summaries = [r.value for r in results]
    assert [s["status"] for s in summaries] == ["finished"] * 4
    assert len({s["weights_checksum"] for s in summaries}) == 1
    assert [r["step"] for r in read_jsonl(runs.rank_log(run, 0))][-2:] == [ckpt + 1, ckpt + 2]  # from the checkpoint
    fresh = cluster.engines()  # the relaunch started 4 new engines over SSH, planned as before
    assert {e.pid for e in fresh}.isdisjoint(e.pid for e in job.engines)
    _assert_two_per_host(net, fresh)
