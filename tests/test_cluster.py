"""nmtkit.cluster: the pure parts (host plan, per-rank environment, listen address, preflight decision) and a real
2-engine local cluster (connection files, rank environment, rank ordering, re-launch, preflight refusals, a stop
after an engine died)."""
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time

import psutil
import pytest

from nmtkit import config
from nmtkit.config import ClusterConfig

pytest.importorskip("horovod", reason="Horovod is not installed: make setup (scripts/setup.sh) builds it")
from horovod.runner.common.util.hosts import SlotInfo, get_host_assignments

from nmtkit import cluster as cl  # needs horovod.runner
from nmtkit.cluster import plan, preflight, remote
from nmtkit.errors import ClusterError

# --- pure: hosts, slots, environment, listen address ---------------------------------------------------------------

def test_parse_hosts():
    assert [(h.hostname, h.slots) for h in plan.parse_hosts("10.0.0.5:2, 10.0.0.6:2")] == [("10.0.0.5", 2),
                                                                                         ("10.0.0.6", 2)]
    assert [(h.hostname, h.slots) for h in plan.parse_hosts("vm1")] == [("vm1", 1)]
    assert plan.parse_hosts("") == []
    with pytest.raises(ClusterError, match="10.0.0.5:x"):
        plan.parse_hosts("10.0.0.5:x")
    with pytest.raises(ClusterError, match="twice"):
        plan.parse_hosts("a:1,a:2")


def test_two_hosts_two_slots_plan():
    slots = plan.assign_slots(["h1", "h1", "h2", "h2"])
    assert all(isinstance(s, SlotInfo) for s in slots)  # Horovod's own slot type
    assert [(s.hostname, s.rank, s.local_rank, s.cross_rank) for s in slots] == [
        ("h1", 0, 0, 0), ("h1", 1, 1, 0), ("h2", 2, 0, 1), ("h2", 3, 1, 1)]
    assert all(s.size == 4 and s.local_size == 2 and s.cross_size == 2 for s in slots)


def test_two_slots_per_host_from_the_host_string_whatever_order_the_engines_register():
    # Cluster(hosts="h1:2,h2:2", launcher="ssh") plans 4 engines; over SSH they register in any order
    c = cl.Cluster(hosts="h1:2,h2:2", launcher="ssh", listen_ip="10.0.0.1")
    assert c.n == 4 and [(h.hostname, h.slots) for h in c.hosts] == [("h1", 2), ("h2", 2)]
    slots = plan.assign_slots(["h2", "h1", "h2", "h1"])
    by_host = {h: sorted((s.rank, s.local_rank, s.cross_rank) for s in slots if s.hostname == h) for h in ("h1", "h2")}
    assert by_host == {"h2": [(0, 0, 0), (1, 1, 0)], "h1": [(2, 0, 1), (3, 1, 1)]}  # the first host seen: ranks 0, 1
    assert sorted(s.rank for s in slots) == [0, 1, 2, 3]
    assert all((s.size, s.local_size, s.cross_size) == (4, 2, 2) for s in slots)


def test_slots_follow_nodes_not_engine_order():
    # engine 0 is on b, engine 1 on a, engine 2 on b: b comes first, so its engines take ranks 0 and 1
    slots = plan.assign_slots(["b", "a", "b"])
    assert [s.rank for s in slots] == [0, 2, 1]
    assert [(s.hostname, s.local_rank, s.local_size) for s in slots] == [("b", 0, 2), ("a", 0, 1), ("b", 1, 2)]
    # local rank 1 exists only on b: its cross communicator has one member
    assert slots[2].cross_size == 1 and slots[0].cross_size == 2 and slots[1].cross_rank == 1


def test_slots_match_horovodrun_for_its_host_string():
    horovodrun = get_host_assignments(plan.parse_hosts("h1:2,h2:1,h3:3"), 6)
    assert plan.assign_slots(["h1", "h1", "h2", "h3", "h3", "h3"]) == horovodrun


def test_logical_nodes_look_like_single_rank_nodes():
    slots = plan.assign_slots(["node0", "node1"])
    assert [(s.local_rank, s.local_size, s.cross_rank, s.cross_size) for s in slots] == [(0, 1, 0, 2), (0, 1, 1, 2)]


def test_rank_env_holds_what_horovodrun_exports():
    slot = plan.assign_slots(["node0", "node1"])[1]
    env = plan.rank_env(slot, addr="10.0.0.5", port=4242, iface="eth1", gloo_timeout=45, device_index=1)
    assert env == {
        "TF_USE_LEGACY_KERAS": "1", "HOROVOD_HOSTNAME": "node1", "HOROVOD_RANK": "1", "HOROVOD_SIZE": "2",
        "HOROVOD_LOCAL_RANK": "0", "HOROVOD_LOCAL_SIZE": "1", "HOROVOD_CROSS_RANK": "1", "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.5", "HOROVOD_GLOO_RENDEZVOUS_PORT": "4242",
        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "eth1",
        "NCCL_SOCKET_IFNAME": "eth1", "HOROVOD_GLOO_TIMEOUT_SECONDS": "45", "NMTKIT_DEVICE_INDEX": "1",
        "HOROVOD_CYCLE_TIME": "10"}  # a CPU rank: nmtkit's cycle, not Horovod's 1 ms (cycle_time_ms)


def test_cycle_time_longer_on_cpu_ranks_horovods_own_on_gpus_and_the_config_wins():
    assert plan.cycle_time_ms(nccl=False) == plan.CPU_CYCLE_MS > 1
    assert plan.cycle_time_ms(nccl=True) is None          # Horovod's default on NCCL ranks
    assert plan.cycle_time_ms(nccl=True, configured=2.5) == 2.5
    slot = plan.assign_slots(["a"])[0]
    assert "HOROVOD_CYCLE_TIME" not in plan.rank_env(slot, addr="127.0.0.1", port=1, iface="lo", nccl=True)
    assert plan.rank_env(slot, addr="127.0.0.1", port=1, iface="lo", cycle_ms=12)["HOROVOD_CYCLE_TIME"] == "12"
    assert config.load("tiny").cluster.cycle_time_ms == 0  # auto unless set


def test_every_rank_of_a_two_host_plan_sends_nccl_over_the_gloo_interface():
    slots = plan.assign_slots(["h1", "h1", "h2", "h2"])
    envs = [plan.rank_env(s, addr="10.0.0.1", port=5000, iface="ens5", nccl=True) for s in slots]
    assert [e["HOROVOD_LOCAL_RANK"] for e in envs] == ["0", "1", "0", "1"]
    assert [e["HOROVOD_CROSS_RANK"] for e in envs] == ["0", "0", "1", "1"]
    for env in envs:
        assert env["NCCL_SOCKET_IFNAME"] == env["HOROVOD_GLOO_IFACE"] == "ens5"
        assert env["HOROVOD_GPU_OPERATIONS"] == "NCCL"
        assert env["HOROVOD_SIZE"] == "4" and env["HOROVOD_LOCAL_SIZE"] == "2" and env["HOROVOD_CROSS_SIZE"] == "2"


def test_gpu_operations_only_when_asked():
    env = plan.rank_env(plan.assign_slots(["a"])[0], addr="127.0.0.1", port=1, iface="lo")
    assert "HOROVOD_GPU_OPERATIONS" not in env and env["HOROVOD_CONTROLLER"] == "gloo"


def test_controller_listens_on_loopback_or_the_one_route():
    assert plan.controller_ip([]) == "127.0.0.1"
    assert plan.controller_ip(["10.0.0.5", "10.0.0.6"], route_src=lambda h: "10.0.0.2") == "10.0.0.2"
    with pytest.raises(ClusterError, match="10.0.0.5 via 10.0.0.2.*192.168.1.9 via 192.168.1.2.*cluster.listen"):
        plan.controller_ip(["10.0.0.5", "192.168.1.9"],
                         route_src={"10.0.0.5": "10.0.0.2", "192.168.1.9": "192.168.1.2"}.get)


@pytest.mark.parametrize("addr", ["0.0.0.0", "::", "0:0:0:0:0:0:0:0", "::0", "[::]", "", "*", " 0.0.0.0 "])
def test_every_any_address_is_refused_naming_cluster_listen(addr):
    with pytest.raises(ClusterError) as err:
        plan.check_listen(addr)
    assert "cluster.listen" in str(err.value) and "cluster.iface" not in str(err.value)
    with pytest.raises(ClusterError, match="cluster.listen"):
        cl.Cluster(engines=1, listen_ip=addr)
    if addr.strip():  # an empty cluster.listen means "detect", not "every interface"
        with pytest.raises(ClusterError, match="refusing to listen on every interface"):
            cl.Cluster(ClusterConfig(listen=addr))


@pytest.mark.parametrize("addr", ["127.0.0.1", "10.0.0.2", "::1", "fe80::1", "node0", "[::1]"])
def test_specific_addresses_are_accepted(addr):
    assert plan.check_listen(addr) == addr.strip("[]")


def test_listen_address_comes_from_cluster_listen_then_listen_ip():
    cfg = config.profile("tiny").with_overrides({"cluster.listen": "10.9.8.7"})
    assert cl.Cluster(cfg).listen_ip == "10.9.8.7"
    assert cl.Cluster(cfg, listen_ip="127.0.0.1").listen_ip == "127.0.0.1"
    assert cl.Cluster(config.profile("tiny")).listen_ip == "127.0.0.1"  # local engines: loopback


def test_the_package_has_no_display_code_no_big_file_and_no_tensorflow_on_the_driver():
    root = os.path.dirname(cl.__file__)
    for name in os.listdir(root):
        if name.endswith(".py"):
            text = open(os.path.join(root, name)).read()
            assert "IPython" not in text and "ipywidgets" not in text, name
            assert text.count("\n") <= 350, name
    code = "import sys, nmtkit.cluster; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _facts(**over):
    base = dict(host="vm", pid=1, python="3.11.7", nmtkit="0.1.0", nmtkit_source="abc", tensorflow="2.18.1",
                horovod="0.28.1", horovod_build="gloo", nccl_built=False, gpus=0, data_ok=True, data_dir="/d",
                data_missing=[], data_sha="s1", host_addr="10.0.0.9", rendezvous="10.0.0.2:5000", rendezvous_ok=True,
                iface="eth0")
    base.update(over)
    return base


def test_preflight_accepts_identical_nodes():
    facts = [_facts(rank=0, node="node0"), _facts(rank=1, node="node1")]
    assert preflight.preflight_problems(facts) == []
    table = preflight.preflight_table(facts)
    assert list(table.index) == [0, 1] and table.loc[1, "node"] == "node1"
    assert table.loc[0, "data_dir"] == "/d"  # outside the workspace: shown as is


def test_preflight_table_shows_workspace_paths_relative(tmp_path, monkeypatch):
    monkeypatch.setenv("NMTKIT_WORKDIR", str(tmp_path))
    facts = [_facts(rank=0, node="node0", data_dir=str(tmp_path / "data" / "tiny"))]
    assert preflight.preflight_table(facts).loc[0, "data_dir"] == "<workspace>/data/tiny"


@pytest.mark.parametrize("over,words", [
    (dict(tensorflow="2.17.1"), ["rank 1 on node1", "TensorFlow 2.17.1 differs from 2.18.1"]),
    (dict(horovod_build="gloo,mpi"), ["rank 1 on node1", "Horovod build gloo,mpi differs from gloo"]),
    (dict(horovod_build="mpi"), ["rank 1 on node1", "built without Gloo", "HOROVOD_WITH_GLOO=1"]),
    (dict(nmtkit_source="zzz"), ["rank 1 on node1", "nmtkit source"]),
    (dict(data_ok=False, data_missing=["spm.model"], data_dir="/data/tiny"), ["rank 1 on node1", "/data/tiny",
                                                                              "spm.model"]),
    (dict(data_sha="s2"), ["rank 1 on node1", "prepared data differs"]),
    (dict(rendezvous_ok=False, rendezvous_error="timed out"), ["rank 1 on node1", "10.0.0.2:5000", "timed out"]),
    (dict(gpus=1, nccl_built=False), ["rank 1 on node1", "without NCCL"]),
    (dict(host_addr="127.0.1.1"), ["rank 1 on node1", "resolves to 127.0.1.1", "/etc/hosts"]),
])
def test_preflight_refuses_a_mismatch_naming_node_and_difference(over, words):
    facts = [_facts(rank=0, node="node0"), _facts(rank=1, node="node1", **over)]
    problems = preflight.preflight_problems(facts)
    assert problems, over
    text = " ".join(problems)
    for w in words:
        assert w in text


# --- a real 2-engine local cluster ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = cl.Cluster(engines=2, profile_dir=tmp_path_factory.mktemp("ipython") / "profile_nmtkit").start()
    yield c
    c.stop()


@pytest.mark.slow
def test_connection_files_private_and_controller_on_loopback(cluster):
    files = cluster.connection_files()
    assert set(files) == {"engine", "client"}
    for path in files.values():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    info = json.loads(open(files["engine"]).read())
    assert info["location"] == "127.0.0.1" or "127.0.0.1" in json.dumps(info)
    assert "0.0.0.0" not in json.dumps(info)
    cmd = cluster.engine_command()
    assert "ipengine --file=" in cmd and os.path.basename(files["engine"]) in cmd


@pytest.mark.slow
def test_local_engines_pose_as_nodes(cluster):
    engines = cluster.engines()
    assert [e.node for e in engines] == ["node0", "node1"]
    assert {e.host for e in engines} == {socket.gethostname()}
    assert [e.slot.rank for e in engines] == [0, 1]


@pytest.mark.slow
def test_each_rank_gets_its_environment_and_horovod_agrees(cluster):
    results = cluster.submit(remote.rank_check).wait(timeout=180)
    assert [r.rank for r in results] == [0, 1]
    for rank, r in enumerate(results):
        v = r.value
        assert v["hvd"] == (rank, 2, 0, 1, rank, 2)  # two single-rank "nodes"
        assert v["allreduce_sum"] == 3.0                        # 1 + 2: the allreduce crossed ranks
        env = v["env"]
        assert env["HOROVOD_HOSTNAME"] == f"node{rank}" and env["HOROVOD_RANK"] == str(rank)
        assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1" and env["HOROVOD_GLOO_IFACE"] == "lo"
        assert env["HOROVOD_CONTROLLER"] == "gloo" and env["HOROVOD_CPU_OPERATIONS"] == "gloo"
        assert env["NCCL_SOCKET_IFNAME"] == env["HOROVOD_GLOO_IFACE"]  # what the rank's process really holds


@pytest.mark.slow
def test_results_are_ordered_by_rank_not_engine_id_and_relaunch_works(cluster):
    ids = list(cluster.ids)
    pid_of = dict(zip(ids, cluster.client[ids].apply_sync(os.getpid)))
    cluster.ids = list(reversed(ids))  # the second engine id now comes first, so it becomes node0 = rank 0
    try:
        engines = cluster.engines(refresh=True)
        assert [e.id for e in engines] == list(reversed(ids))
        # a second launch on engines that already ran hvd.init(): fresh rendezvous, hvd.shutdown() then init
        results = cluster.submit(remote.rank_check).wait(timeout=180)
        assert [r.rank for r in results] == [0, 1]
        assert [r.value["pid"] for r in results] == [pid_of[ids[1]], pid_of[ids[0]]]
        assert all(r.value["allreduce_sum"] == 3.0 for r in results)
    finally:
        cluster.ids = ids
        cluster.engines(refresh=True)


@pytest.mark.slow
def test_preflight_refuses_an_engine_whose_data_dir_is_missing(cluster, tmp_path):
    missing = tmp_path / "not-prepared"
    with pytest.raises(ClusterError) as err:
        cluster.preflight(missing)
    text = str(err.value)
    assert "rank 0 on node0" in text and "rank 1 on node1" in text and str(missing) in text and "spm.model" in text


@pytest.mark.slow
def test_preflight_table_and_unreachable_rendezvous_named(cluster, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in remote.DATA_MARKERS:
        (data / name).write_text("x")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    table = cluster.preflight(data, rendezvous=("127.0.0.1", port), raise_on_problems=False)
    assert list(table.index) == [0, 1] and table["data_ok"].all() and not table["rendezvous_ok"].any()
    with pytest.raises(ClusterError, match=f"cannot reach the rendezvous server at 127.0.0.1:{port}"):
        cluster.preflight(data, rendezvous=("127.0.0.1", port))


@pytest.mark.slow
def test_push_data_copies_files_to_a_node(cluster, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(os.urandom(3000))
    (src / "manifest.json").write_text("{}")
    from nmtkit.cluster.preflight import copy_to_node
    engine = cluster.engines()[1]
    sent = copy_to_node(cluster.client[engine.id], src, str(tmp_path / "dest"), chunk=1024)  # 3 chunks for a.bin
    assert sent == 3002
    for name in ("a.bin", "manifest.json"):
        assert (tmp_path / "dest" / name).read_bytes() == (src / name).read_bytes()
    assert not list((tmp_path / "dest").glob("*.part"))


@pytest.mark.slow
def test_stop_after_an_engine_died_ends_the_rest_and_raises_nothing(tmp_path):
    """A failed job's engines are SIGKILLed (Job._release); ipyparallel marks them stopped only later, and its own
    signal_engines raised psutil.NoSuchProcess at the first, so leaving `with Cluster(...)` hid the job's error."""
    with cl.Cluster(engines=2, profile_dir=tmp_path / "profile_nmtkit") as c:
        procs = [psutil.Process(e.pid) for e in c.engines()] + [psutil.Process(c._ipp.controller.pid)]
        procs[0].send_signal(signal.SIGKILL)
        time.sleep(3)  # ipyparallel's wait thread reaps it (polls each second); the cluster still counts it running
    gone, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive, alive
