"""Questions 1, 3, 4, 5 and 11 on the shipped reference run compare like with like: cores with cores, a faster
link's exchange with the compute it would join, one direction with a one-way link, one price everywhere, and a
gap that changed sign called a crossing."""
from __future__ import annotations

import pytest

from nmtkit.analysis import evidence, load_run, reference_run
from nmtkit.analysis.machines import align_steps_to_network, net_busiest_direction, per_host
from nmtkit.analysis.report import ending
from nmtkit.course.instructor import book


@pytest.fixture(scope="module")
def ref():
    return load_run(reference_run())


def test_q3_calls_a_gap_that_changed_sign_a_crossing(ref):
    a = book.answer(ref, 3)
    first, last = a.evidence["gap_first"], a.evidence["gap_last"]
    assert first < 0 < last and a.evidence["gap_crossed"] is True
    assert "crossing zero" in a.answer and "shrank" not in a.answer


def test_q4_sets_the_ranks_cores_beside_the_machines_busy_cores(ref):
    a = book.answer(ref, 4)
    ev = a.evidence
    procs = [p["proc_cpu_mean"] for p in ev["rank_processes"]]
    assert ev["one_machine"] is True and ev["cores_present"] == ev["cpu_count"] == 2
    assert ev["ranks_cores"] == pytest.approx(ref.n_ranks * sum(procs) / len(procs) / 100)
    assert ev["busy_cores"] == pytest.approx(sum(d["mean"] for d in ev["devices"]) / len(ev["devices"]) / 100 * 2)
    assert 0.5 < ev["ranks_share_of_busy"] < 1  # the ranks were most of the machine's work, not idle beside it
    assert ev["mfu_all_cores"] == pytest.approx(ref.n_ranks * ev["mfu"] / 2)
    assert f"{ev['busy_cores']:.2f} cores the system saw busy" in a.answer and "idle rank processes" not in a.answer


def test_q5_sets_a_faster_links_exchange_beside_the_compute_part_of_the_step(ref):
    a = book.answer(ref, 5)
    ev = a.evidence
    assert ev["compute_s"] == pytest.approx(ev["mean_step_time_s"] - ev["allreduce_time_on_link_s"])
    assert ev["share_at_1g"] == pytest.approx(ev["link_s_1g"] / (ev["compute_s"] + ev["link_s_1g"]))
    assert ev["share_at_1g"] > ev["link_s_1g"] / ev["mean_step_time_s"]  # the whole step held the slow exchange
    assert f"{ev['compute_s'] * 1000:.0f} ms, is the compute" in a.answer and "against a step of" not in a.answer


def test_q11_pairs_and_the_network_figure_read_one_direction(ref):
    pairs, iface, _ = align_steps_to_network(ref, 3)
    mon = per_host(ref.monitor)
    r0_host = str(ref.ranks[ref.ranks["rank"] == 0]["host"].iloc[0])
    m = mon[mon["host"].astype(str) == r0_host].sort_values("time")
    one_way = dict(zip(m["time"], net_busiest_direction(m, iface)))
    assert all(one_way[t] == pytest.approx(v) for t, v in zip(pairs["time"], pairs["net_Bps"]))
    link_Bps = ref.status["link_measured_mbit_s"] * 1e6 / 8
    assert pairs["net_Bps"].max() <= 1.1 * link_Bps  # one direction stays within a one-way link's rate


def test_one_price_for_the_report_question_1_and_run_json(ref):
    assert ref.status["projection"]["price_per_node_hour"] == 3.06  # what training recorded
    price, why = evidence.node_price(ref, evidence.Options())
    assert price is None and "one machine" in why and "3.06" in why
    line = ending(ref.status, ref)
    assert "$" not in line and "no cost" in line
    assert "No cost" in book.answer(ref, 1).answer
    priced = evidence.Options(price_per_node_hour=2.0)  # a caller who names the hardware prices it, everywhere
    hours = ref.status["projection"]["total_hours"]
    assert f"${hours * 2 * 2.0:,.2f}" in ending(ref.status, ref, priced)
    assert book.answer(ref, 1, options=priced).evidence["price"] == 2.0
