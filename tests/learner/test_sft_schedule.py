"""The `slca sft` lr follows the spent fraction of the real budget (steps or time), not a guessed horizon."""

from __future__ import annotations

import pytest

from learner.sft_schedule import FLOOR, WARMUP_STEPS, Budget, lr_at

BASE = 5e-5


def test_lr_at_time_fraction_zero_mid_and_end():
    assert lr_at(0, 0.0, BASE) == pytest.approx(BASE / WARMUP_STEPS)  # first step: warming up
    assert lr_at(40, 0.5, BASE) == pytest.approx(BASE * (1 - (1 - FLOOR) * 0.5))  # linear decay, half-way
    assert lr_at(80, 1.0, BASE) == pytest.approx(BASE * FLOOR)  # the floor exactly at the deadline


def test_warm_up_ends_after_its_steps_or_its_share_of_the_budget_whichever_first():
    assert lr_at(WARMUP_STEPS - 1, 0.01, BASE) == pytest.approx(BASE * (1 - (1 - FLOOR) * 0.01))
    assert lr_at(2, 0.05, BASE) == pytest.approx(BASE * (1 - (1 - FLOOR) * 0.05))  # slow steps: 5% of the time
    assert lr_at(1, 0.01, BASE) < lr_at(2, 0.01, BASE) < lr_at(3, 0.01, BASE)
    after = [lr_at(s, p, BASE) for s, p in ((10, 0.1), (20, 0.3), (30, 0.6), (40, 0.9))]
    assert after == sorted(after, reverse=True)


def test_budget_progress_is_the_limit_nearest_its_end():
    timed = Budget(seconds=600)
    assert timed.progress(3, 300) == pytest.approx(0.5) and not timed.done(3, 300) and timed.done(9, 600)
    assert timed.seconds_left(3, 450) == pytest.approx(150)
    counted = Budget(steps=20)
    assert counted.progress(5, 1e6) == pytest.approx(0.25) and counted.done(20, 1)
    assert counted.seconds_left(0, 0) is None and counted.seconds_left(5, 10) == pytest.approx(30)
    both = Budget(steps=100, seconds=60)
    assert both.progress(10, 30) == pytest.approx(0.5) and both.progress(80, 30) == pytest.approx(0.8)
    assert not Budget().done(5, 5.0) and Budget().progress(5, 5.0) == 0.0


def test_a_step_floor_keeps_a_timed_budget_going_on_a_slow_machine():
    floored = Budget(seconds=360, min_steps=12)
    assert not floored.done(5, 380)  # the minutes are spent, the floor is not (a loaded machine: 5 steps)
    assert floored.progress(6, 400) == pytest.approx(0.5)  # the lr decays toward the floor's end, not at its end
    assert floored.seconds_left(6, 400) == pytest.approx(400)  # the mean step time × the steps to go
    assert floored.done(12, 800)
    fast = Budget(seconds=360, min_steps=12)
    assert fast.progress(19, 180) == pytest.approx(0.5) and fast.done(19, 360)  # idle and bf16: the floor is passed
    capped = Budget(steps=8, seconds=360, min_steps=12)
    assert capped.done(8, 100)  # an explicit step budget still caps
