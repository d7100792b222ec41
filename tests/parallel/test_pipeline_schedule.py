"""Pipeline schedules (minispore/nn/pipeline_schedule.py) without MPI: the action lists, the
discrete-event timer against the closed forms of Narayanan et al. 2021 §2.2 (bubble (p-1)/m,
interleaved (p-1)/(v m), the worked values of ARCHITECTURE's reference: 0.375, 0.1875, 0.109,
0.0273) and the in-flight bounds (GPipe m, 1F1B min(p-i, m))."""
import itertools

import pytest

from minispore.common.errors import OpTypeError, OpValueError
from minispore.nn.pipeline_schedule import (Action, bubble_fraction_formula, gpipe, interleaved_1f1b,
                                            make_schedule, one_f_one_b, peak_in_flight, peak_in_flight_formula,
                                            simulate)


def test_one_f_one_b_order_on_a_small_pipeline():
    s = one_f_one_b(3, 4)
    F, B = "F", "B"
    assert [tuple(a) for a in s[0]] == [(F, 0, 0), (F, 1, 0), (F, 2, 0), (B, 0, 0), (F, 3, 0), (B, 1, 0),
                                        (B, 2, 0), (B, 3, 0)]
    assert [tuple(a) for a in s[2]] == [(F, 0, 2), (B, 0, 2), (F, 1, 2), (B, 1, 2), (F, 2, 2), (B, 2, 2),
                                        (F, 3, 2), (B, 3, 2)]


def test_gpipe_runs_all_forwards_first():
    s = gpipe(2, 3)
    assert [a.kind for a in s[1]] == ["F"] * 3 + ["B"] * 3
    assert all(a.chunk == 1 for a in s[1])


def test_interleaved_places_chunk_c_on_device_c_mod_p():
    s = interleaved_1f1b(2, 4, 2)
    assert {a.chunk for a in s[0]} == {0, 2} and {a.chunk for a in s[1]} == {1, 3}
    # Megatron's order: forwards in groups of p micro-batches per chunk
    assert [(a.microbatch, a.chunk) for a in s[0] if a.kind == "F"] == [(0, 0), (1, 0), (0, 2), (1, 2), (2, 0),
                                                                        (3, 0), (2, 2), (3, 2)]


@pytest.mark.parametrize("p,m,v,want", [(4, 8, 1, 0.375), (4, 8, 2, 0.1875), (8, 64, 1, 7 / 64),
                                        (8, 64, 4, 7 / 256)])
def test_worked_bubble_values(p, m, v, want):
    for sched in (("gpipe", "1f1b") if v == 1 else ("1f1b",)):
        t = simulate(make_schedule(sched, p, m, v))
        assert t.bubble_fraction == pytest.approx(want, abs=1e-12)
        assert t.bubble_fraction == pytest.approx(bubble_fraction_formula(p, m, v), abs=1e-12)
        assert all(t.idle_fraction(d) == pytest.approx(want, abs=1e-12) for d in range(p))
    assert round(bubble_fraction_formula(8, 64), 3) == 0.109 and round(bubble_fraction_formula(8, 64, 4), 4) == 0.0273


@pytest.mark.parametrize("t_f,t_b", [(1.0, 1.0), (1.0, 2.0), (0.5, 3.0)])
@pytest.mark.parametrize("p,m", [(2, 1), (2, 4), (3, 5), (4, 4), (4, 8), (5, 3)])
def test_bubble_equals_closed_form_for_gpipe_and_1f1b(p, m, t_f, t_b):
    for sched in ("gpipe", "1f1b"):
        t = simulate(make_schedule(sched, p, m), t_f, t_b)
        assert t.makespan == pytest.approx((m + p - 1) * (t_f + t_b))
        assert t.bubble_fraction == pytest.approx((p - 1) / m)


@pytest.mark.parametrize("t_f,t_b", [(1.0, 1.0), (1.0, 2.0), (0.5, 3.0)])
@pytest.mark.parametrize("p,m,v", [(2, 2, 2), (2, 4, 2), (2, 6, 3), (4, 4, 2), (4, 8, 2), (3, 6, 2), (4, 12, 3)])
def test_interleaved_bubble_equals_closed_form(p, m, v, t_f, t_b):
    t = simulate(interleaved_1f1b(p, m, v), t_f, t_b)
    assert t.bubble_fraction == pytest.approx((p - 1) / (v * m), abs=1e-12)
    assert t.makespan == pytest.approx((m + (p - 1) / v) * (t_f + t_b))


@pytest.mark.parametrize("p,m", [(2, 1), (2, 4), (4, 2), (4, 8), (5, 7)])
def test_peak_in_flight_bounds(p, m):
    assert peak_in_flight(gpipe(p, m)) == [m] * p
    assert peak_in_flight(one_f_one_b(p, m)) == [min(p - i, m) for i in range(p)]
    assert simulate(one_f_one_b(p, m)).peak_in_flight == [peak_in_flight_formula("1f1b", p, m, i) for i in range(p)]


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 4, 3)])
def test_interleaved_peak_and_korthikanti_memory_factor(p, m, v):
    peaks = peak_in_flight(interleaved_1f1b(p, m, v))
    assert peaks == [peak_in_flight_formula("1f1b", p, m, d, v) for d in range(p)]
    if m * v >= 2 * (p - 1) + (v - 1) * p + 1:
        # stage 0 holds p (1 + (p-1)/(p v)) stages' worth of activations (chunk-tapes are 1/v each)
        assert peaks[0] / v == pytest.approx(p * (1 + (p - 1) / (p * v)))


def test_every_schedule_runs_each_pair_once_and_finishes():
    for p, m in itertools.product((1, 2, 3, 4), (1, 2, 4, 8)):
        for sched in ("gpipe", "1f1b"):
            simulate(make_schedule(sched, p, m))          # validates the lists, raises on deadlock
        if m % p == 0:
            simulate(make_schedule("1f1b", p, m, 2))


def test_simulator_refuses_a_deadlocking_order():
    # device 0 waits for the backward of micro-batch 0 before sending its forward
    bad = [[Action("F", 0, 0), Action("B", 0, 0)], [Action("B", 0, 1), Action("F", 0, 1)]]
    with pytest.raises(OpValueError, match="simulate"):
        simulate(bad)
    reordered = [[Action("F", 1, 0), Action("F", 0, 0), Action("B", 0, 0), Action("B", 1, 0)],
                [Action("F", 0, 1), Action("B", 0, 1), Action("F", 1, 1), Action("B", 1, 1)]]
    simulate(reordered)                                  # out of order, but it can finish
    # device 0 waits for B(0) from device 1, which first waits for F(1) that device 0 runs later
    stuck = [[Action("F", 0, 0), Action("B", 0, 0), Action("F", 1, 0), Action("B", 1, 0)],
             [Action("F", 1, 1), Action("B", 1, 1), Action("F", 0, 1), Action("B", 0, 1)]]
    with pytest.raises(OpValueError, match="deadlock"):
        simulate(stuck)


def test_communication_time_lengthens_the_step():
    base = simulate(one_f_one_b(4, 8)).makespan
    assert simulate(one_f_one_b(4, 8), t_comm=0.25).makespan > base


def test_bad_schedule_arguments():
    with pytest.raises(OpValueError, match="interleaved_1f1b"):
        interleaved_1f1b(4, 6, 2)                        # m not a multiple of p
    with pytest.raises(OpValueError, match="pipeline schedule"):
        make_schedule("zero_bubble_v", 2, 4)
    with pytest.raises(OpValueError, match="pipeline schedule"):
        make_schedule("gpipe", 2, 4, 2)
    with pytest.raises(OpTypeError, match="gpipe"):
        gpipe(2, 2.0)
    with pytest.raises(OpValueError, match="1f1b"):
        one_f_one_b(0, 4)
