"""The GPU's first run, second pass (issue 53): what a reader predicted would fail on the first real GPU run,
each shown on CPU with the GPU side faked."""
from __future__ import annotations

GIB = 2**30


def _held(pid: int, gib: float, name: str = "ipengine") -> dict:
    return {"pid": pid, "mib": gib * 1024, "name": name}


def _engine_facts(rank: int, pid: int, held_by: list) -> dict:
    # what nmtkit.gpus.gpu_holders reports on an engine: every process on its GPU but itself
    return {"rank": rank, "node": "vm1", "host": "vm1", "pid": pid, "data_ok": True, "horovod": "0.28.1",
            "nccl_built": True, "horovod_build": "gloo,nccl", "gpus": 2,
            "gpu_memory": [{"gpu": rank, "used_mib": 15 * 1024, "total_mib": 16 * 1024, "held_by": held_by}]}


def test_two_engines_of_one_cluster_are_not_refused_by_preflight():
    from nmtkit.cluster.preflight import preflight_problems
    # after a first launch each engine keeps its GPU (TensorFlow never gives memory back); NVML lists the sibling
    # engine on the shared view of a VM's GPUs
    facts = [_engine_facts(0, 1001, [_held(1002, 14.5)]), _engine_facts(1, 1002, [_held(1001, 14.5)])]
    assert preflight_problems(facts) == []
    # a stranger (notebook 02's idle kernel) is still named
    facts[0]["gpu_memory"][0]["held_by"].append(_held(4242, 14.2, "python -m ipykernel_launcher"))
    [problem] = preflight_problems(facts)
    assert "pid 4242" in problem and "pid 1002" not in problem


def _own_address() -> str:
    import socket

    import psutil
    for name, addrs in sorted(psutil.net_if_addrs().items()):
        for a in addrs:
            if name != "lo" and a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    import pytest
    pytest.skip("this machine has no network interface but lo")


def test_no_lo_for_a_cross_node_job_with_cluster_iface_empty():
    # the real route lookup: `ip route get <own address>` answers `lo`; hosts[0] is the driver's own VM
    from nmtkit.cluster.launchers import make_launcher
    from nmtkit.cluster.plan import iface_for, link_iface, parse_hosts
    own = _own_address()
    assert iface_for(own) != "lo"
    hosts = parse_hosts(f"{own}:2,198.51.100.7:2")  # the second VM (TEST-NET-2: never reached, only routed)
    assert link_iface("", hosts, make_launcher("ssh", hosts)) not in ("lo", "")
    assert iface_for("127.0.0.1") == "lo" and link_iface("", [], make_launcher("local", [])) == "lo"


def test_every_nccl_variable_on_the_driver_reaches_every_rank(monkeypatch):
    # SSH-started engines do not inherit the driver's environment: rank_env is all they get
    from nmtkit.cluster import plan
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    monkeypatch.setenv("NCCL_IB_DISABLE", "1")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    for slot in plan.assign_slots(["vm1", "vm1", "vm2", "vm2"]):
        env = plan.rank_env(slot, addr="10.0.0.5", port=1, iface="ens5", nccl=True)
        assert (env["NCCL_P2P_DISABLE"], env["NCCL_IB_DISABLE"], env["NCCL_DEBUG"]) == ("1", "1", "INFO")


def _notebook_cell(marker: str) -> str:
    import json
    from pathlib import Path
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "03_horovod_multinode.ipynb").read_text())
    [src] = [s for s in ("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code") if marker in s]
    return src


def test_notebook_03_cells_read_a_table_with_an_ens5_column(capsys):
    # with cluster.iface set (docs/instructors.md), compression_trials names the column for that NIC
    import pandas as pd

    from nmtkit.course import practice, prose
    rows = [{"compression": comp, "ranks": 4, "params": 1_054_208, "interface": "ens5", "bytes/step sent": sent,
             "step time (ms)": ms, "exchange alone (ms)": alone, "same weights": True}
            for comp, sent, ms, alone in (("none", 6_324_000, 160.3, 20.0), ("fp16", 3_170_000, 351.0, 12.0))]
    ns = {"trials": pd.DataFrame(rows).set_index("compression"), "gbps": 1.0, "pd": pd}
    exec(_notebook_cell("fewer bytes per step than none"), ns)
    assert "fp16 sent 50% fewer bytes" in capsys.readouterr().out
    exec(_notebook_cell("break_even ="), ns)
    want = prose.link_table(ns["trials"], 1.0)["break-even link (Gbit/s)"]
    assert abs(ns["break_even"]["none"] - want["none"]) < 1e-3  # a NIC sees one rank's share, not all ranks'
    practice.check_link_share(ns["trials"], 1.0, compute_ms=ns["compute_ms"], error_ms=ns["error_ms"],
                              break_even=ns["break_even"], sets_pace=ns["sets_pace"])


def test_micro_batches_are_ordered_in_the_graph():
    # nothing else orders them: TensorFlow's executor runs independent branches at once; the second micro-batch's
    # ops wait for the first one's gradients, while the first starts at once
    from nmtkit import config
    from nmtkit.training.trainer import Trainer
    cfg = config.load("tiny", {"train.grad_accum": 2, "data.batch_sentences": 8})
    trainer = Trainer(cfg, cfg.data.vocab_size)
    assert trainer.accum == 2
    graph = trainer.train_step.get_concrete_function().graph
    src0, _, src1, _ = graph.inputs[:4]  # the signature's ((src, tgt), (src, tgt))
    assert not any(op.control_inputs for op in src0.consumers())
    waiting = [op for op in src1.consumers() if op.control_inputs]
    assert waiting, [op.name for op in src1.consumers()]


def test_notebook_02_caps_its_in_kernel_baseline_on_non_tiny_profiles(tmp_path):
    # wmt16-base would train 300,000 steps in the kernel and then hold GPU 0; the long run is the CLI's
    import json
    import types
    from pathlib import Path

    from nmtkit import config
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "02_single_gpu_baseline.ipynb").read_text())
    [cell] = [s for s in ("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
              if "summary = nk.train(cfg, run)" in s]
    for name, most in (("wmt16-base", 2_000), ("tiny", config.profile("tiny").train.steps)):
        trained = []
        nk = types.SimpleNamespace(train=lambda cfg, run, **kw: trained.append(cfg) or {})
        exec(cell, {"nk": nk, "cfg": config.profile(name), "run": tmp_path})
        assert trained[0].train.steps <= most, (name, trained[0].train.steps)
