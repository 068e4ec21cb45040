"""The sampler: record format, GPU fields through a fake NVML, network rates, the thread, the live view."""
import io
import time
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest

import nmtkit  # noqa: F401
from nmtkit import monitor
from nmtkit.errors import TrainError
from nmtkit.files import read_jsonl


class FakeNVMLError(Exception):
    pass


def fake_nvml(n=2, util=(97, 40), power_supported=True, init_fails=False):
    """A stand-in for the pynvml module: n devices with fixed readings."""
    def init():
        if init_fails:
            raise FakeNVMLError("Driver Not Loaded")

    def power(h):
        if not power_supported:
            raise FakeNVMLError("Not Supported")
        return 250_000 + h  # milliwatts

    return SimpleNamespace(
        nvmlInit=init,
        nvmlDeviceGetCount=lambda: n,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=util[h], memory=10),
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=(h + 1) * 2**30, total=16 * 2**30, free=0),
        nvmlDeviceGetPowerUsage=power,
    )


def test_gpu_fields_from_fake_nvml():
    nvml, handles, reason = monitor.open_gpus(fake_nvml())
    assert len(handles) == 2 and reason == ""
    rec = monitor.gpu_sample(nvml, handles)
    assert rec["gpu0_util"] == 97.0 and rec["gpu1_util"] == 40.0
    assert rec["gpu1_mem_used_mib"] == 2048.0 and rec["gpu0_mem_total_mib"] == 16384.0
    assert rec["gpu1_power_w"] == pytest.approx(250.001)


def test_unsupported_power_is_left_out_not_faked():
    nvml, handles, _ = monitor.open_gpus(fake_nvml(power_supported=False))
    rec = monitor.gpu_sample(nvml, handles)
    assert "gpu0_power_w" not in rec and "gpu0_util" in rec


def test_no_driver_means_cpu_only_with_reason():
    nvml, handles, reason = monitor.open_gpus(fake_nvml(init_fails=True))
    assert handles == [] and "Driver Not Loaded" in reason
    _, handles, reason = monitor.open_gpus(fake_nvml(n=0))
    assert handles == [] and "no GPU" in reason


def test_net_rates_are_deltas_per_second():
    C = namedtuple("C", "bytes_sent bytes_recv")
    before = {"eth0": C(1000, 5000), "veth-a@if3": C(0, 0)}
    after = {"eth0": C(3000, 5500), "veth-a@if3": C(10, 0), "new0": C(99, 99)}
    r = monitor.net_rates(before, after, dt=2.0)
    assert r["net_eth0_sent_Bps"] == 1000.0 and r["net_eth0_recv_Bps"] == 250.0
    assert r["net_veth_a_if3_sent_Bps"] == 5.0
    assert not any(k.startswith("net_new0") for k in r)  # no previous reading: no rate
    # a counter reset is not negative traffic
    assert monitor.net_rates(after, before, 1.0)["net_eth0_sent_Bps"] == 0.0


def test_column_names_are_what_the_sampler_writes():
    C = namedtuple("C", "bytes_sent bytes_recv")
    rec = {**monitor.net_rates({"veth-a@if3": C(0, 0)}, {"veth-a@if3": C(8, 4)}, 1.0),
           **monitor.gpu_sample(*monitor.open_gpus(fake_nvml(n=2))[:2])}
    assert monitor.interfaces(rec) == ["veth_a_if3"]
    assert rec[monitor.net_col("veth-a@if3", "sent")] == 8.0 and rec[monitor.net_col("veth_a_if3", "recv")] == 4.0
    assert monitor.gpu_util_cols(list(rec) + ["gpu10_util"]) == ["gpu0_util", "gpu1_util", "gpu10_util"]
    assert {monitor.gpu_col(1, f) for f in monitor.GPU_FIELDS} <= set(rec)


def test_sampler_writes_flat_records(tmp_path, capsys):
    path = tmp_path / "monitor" / "hostA-rank1.jsonl"
    with monitor.Sampler(path, interval=0.05, rank=1, host="hostA", nvml=fake_nvml()) as s:
        deadline = time.time() + 10
        while s.samples < 3 and time.time() < deadline:
            time.sleep(0.02)
    recs = list(read_jsonl(path))
    assert len(recs) >= 3 and s.error is None
    r = recs[-1]
    assert r["host"] == "hostA" and r["rank"] == 1 and r["n_gpus"] == 2
    assert r["gpu0_util"] == 97.0
    for key in ("time", "cpu_percent", "proc_cpu_percent", "mem_used_mib", "proc_rss_mib"):
        assert isinstance(r[key], float)
    assert any(k.startswith("net_") and k.endswith("_recv_Bps") for k in r)
    assert all(not isinstance(v, (dict, list)) for v in r.values())  # flat, for pandas
    assert recs[0]["time"] < recs[-1]["time"]
    n = s.samples
    time.sleep(0.15)
    assert s.samples == n  # stopped means stopped


def test_sampler_says_no_gpu_once(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(monitor, "_said_no_gpu", False)
    for i in range(2):
        s = monitor.Sampler(tmp_path / f"m{i}.jsonl", interval=10, nvml=fake_nvml(init_fails=True)).start()
        rec = s.tick()
        s.stop()
        assert rec["n_gpus"] == 0 and not any(k.startswith("gpu") for k in rec)
    out = capsys.readouterr()
    assert out.out.count("no GPU to sample") == 1 and "no GPU" not in out.err  # a fact for the log, not an error


def test_sampler_errors_never_reach_the_caller(tmp_path, capsys):
    s = monitor.Sampler(tmp_path / "m.jsonl", interval=10, nvml=fake_nvml()).start()
    s.probe.sample = lambda: 1 / 0
    assert s.tick() is None and "ZeroDivisionError" in s.error
    s.stop()
    assert "sampling failed" in capsys.readouterr().err


def test_bad_interval_is_a_clear_error(tmp_path):
    with pytest.raises(TrainError, match="interval"):
        monitor.Sampler(tmp_path / "m.jsonl", interval=0)


def test_tensorboard_scalars_in_their_own_dir(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    tb = tmp_path / "monitor" / "tb"
    s = monitor.Sampler(None, interval=10, tb_dir=tb, nvml=fake_nvml()).start()
    s.tick(), s.tick()
    s.stop()
    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    assert "monitor/gpu0_util" in acc.Tags()["scalars"]
    assert [e.value for e in acc.Scalars("monitor/gpu0_util")] == [97.0, 97.0]


def test_live_view_renders_and_appends(tmp_path):
    out = tmp_path / "live.jsonl"
    buf = io.StringIO()
    assert monitor.live(0.01, out, iterations=2, stream=buf, nvml=fake_nvml()) == 0
    text = buf.getvalue()
    assert text.count("nmtkit monitor") == 2 and "GPU1" in text and "interface" in text
    assert len(list(read_jsonl(out))) == 2


def test_live_ctrl_c_exits_zero(monkeypatch):
    def interrupted(_):
        raise KeyboardInterrupt
    monkeypatch.setattr(monitor.time, "sleep", interrupted)
    assert monitor.live(1.0, stream=io.StringIO(), nvml=fake_nvml()) == 0


def test_render_without_gpu_says_why():
    rec = {"time": 0.0, "host": "h", "cpu_percent": 50.0, "mem_used_mib": 1024.0, "mem_percent": 10.0, "n_gpus": 0,
           "net_eth0_sent_Bps": 2.5e6, "net_eth0_recv_Bps": 0.0}
    text = monitor.render(rec, "NVML unavailable")
    assert "none (NVML unavailable)" in text and "2.5 MB/s" in text


def test_a_monitor_log_from_before_the_mib_names_still_reads():
    """The shipped reference run's sampler records name the MiB columns *_mb; they load as *_mib, unchanged."""
    from nmtkit.analysis.logs import load_monitor
    from nmtkit.files import read_jsonl
    run = Path(monitor.__file__).parent / "reference" / "rehearsal-200mbit"  # the lab's runs are newer
    raw = list(read_jsonl(next((run / "monitor").glob("*.jsonl"))))
    assert "mem_used_mb" in raw[0] and "mem_used_mib" not in raw[0]  # the old style, as shipped
    df = load_monitor(run)
    assert not [c for c in df.columns if c.endswith("_mb")], list(df.columns)
    assert df["mem_used_mib"].iloc[0] == raw[0]["mem_used_mb"] and df["proc_rss_mib"].iloc[0] == raw[0]["proc_rss_mb"]
    assert monitor.renamed_columns(["gpu3_mem_total_mb", "gpu3_util", "train_mb", "mem_used_mib"]) == {
        "gpu3_mem_total_mb": "gpu3_mem_total_mib"}
