"""Two "hosts" without cloud VMs: one hand-started engine in each of two network namespaces (the `manual`
launcher, as students run `ipengine` on each VM), a 2-rank Horovod training across them, and the interface
counters prove that the gradients crossed the link between them.

The hosts are tools.rehearsal.netns.TwoHosts (its docstring has the topology and the why of each piece: names
with a random suffix, a free subnet, a bridge for the control traffic, a tc-limited veth pair nmt0 <-> nmt0 for
Horovod's, host names that resolve to the nmt0 addresses because Horovod 0.28.1 binds its process-set Gloo context
to the host name's address and ignores HOROVOD_GLOO_IFACE there). The engines are started over SSH into each host.
Skipped with the reason where root, iproute2 or sshd is missing.
"""
import importlib.util

import pytest

from nmtkit import config
from tools.rehearsal.netns import TwoHosts, unavailable
from tools.rehearsal.run import CODE_ROOT

_why = unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.netns,
              pytest.mark.skipif(_why is not None, reason=_why or ""),
              pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")]


def test_two_namespaces_train_across_a_veth_link(tmp_path):
    from nmtkit.data.prepare import prepare
    cfg = config.load("tiny", {
        "data.train_size": 2000, "data.dev_size": 20, "data.test_size": 20, "data.vocab_size": 300,
        "data.dir": str(tmp_path / "data"), "model.d_model": 32, "model.encoder_layers": 1,
        "model.decoder_layers": 1, "model.num_heads": 2, "model.d_ff": 64, "train.steps": 6, "train.log_every": 3,
        "train.ckpt_every": 0, "eval.every": 0, "eval.dev_sentences": 5, "eval.test_sentences": 5,
        "eval.beam_size": 1, "eval.max_extra_len": 3, "monitor.enabled": False})
    prepare(cfg, progress=False)
    with TwoHosts(rate="1gbit") as net:
        cluster = net.manual_cluster(cfg, tmp_path / "ipython", CODE_ROOT)
        try:
            # shared filesystem: the data is already "on both nodes"
            table = cluster.preflight(cfg.data.dir)
            assert table["rendezvous_ok"].all() and list(table["iface"]) == ["ctl0", "ctl0"]
            assert sorted(table["host"]) == sorted(h.name for h in net.hosts)
            assert sorted(table["host_addr"]) == sorted(h.data_addr for h in net.hosts)
            # two hosts: preflight measured the link between them (tc 1 Gbit/s; goodput <= 0.95 of it)
            assert cluster.link is not None and 0.5 * 1000 <= cluster.link["mbit_s"] <= 1000
            assert {cluster.link["from"], cluster.link["to"]} == {h.name for h in net.hosts}
            assert table["link"].str.endswith(f"{cluster.link['from']} -> {cluster.link['to']}").all()
            before = [net.counters(i) for i in range(2)]
            results = cluster.launch(cfg, tmp_path / "run", preflight=False).wait(timeout=300)
            after = [net.counters(i) for i in range(2)]
        finally:
            cluster.stop()
    summaries = [r.value for r in results]
    assert [s["status"] for s in summaries] == ["finished", "finished"]
    assert summaries[0]["weights_checksum"] == summaries[1]["weights_checksum"]
    assert sorted(r.value["host"] for r in results) == sorted(h.name for h in net.hosts)
    # launch() recorded the measured link in run.json, where question 5 reads it
    from nmtkit import runs
    status = runs.read_status(tmp_path / "run")
    assert status["link_measured_mbit_s"] == cluster.link["mbit_s"] and status["link_measured"]["at"]
    # ring allreduce on 2 ranks: each rank sends half the gradient in reduce-scatter and half in allgather, i.e.
    # about one float32 per parameter per step; the initial broadcast adds more. So tx >= 4 bytes x params x steps.
    bound = 4 * summaries[0]["params"] * cfg.train.steps
    for b, a in zip(before, after):
        sent, received = a["tx_bytes"] - b["tx_bytes"], a["rx_bytes"] - b["rx_bytes"]
        print(f"nmt0: sent {sent:,} B, received {received:,} B, bound {bound:,} B "
              f"({summaries[0]['params']:,} params x {cfg.train.steps} steps x 4 B)")
        assert sent >= bound and received >= bound
