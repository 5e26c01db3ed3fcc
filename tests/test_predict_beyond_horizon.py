"""The look past the horizon (``summary.best_beyond_horizon``): the same answers as the algorithm
it replaced, which re-evaluated every doubled look from the horizon's next step, kept here
verbatim as the reference."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_grpo.predict import summary
from bayes_grpo.predict.forecast import mean_curve
from bayes_grpo.predict.predict import continued_trajectories
from bayes_grpo.predict.summary import best_beyond_horizon

# ----------------------------------------------------------------------------- the reference
# summary.py at 6aa4307, verbatim but for the module's constants read from the module (so a test
# can shrink the cell budget for both)


def _reference_expected_remaining_gain(mean_draws, plateau, beyond=None):
    mean_draws = np.asarray(mean_draws, dtype=float)
    after = np.asarray(plateau, dtype=float) if beyond is None else np.asarray(beyond, dtype=float)
    future_max = np.maximum.accumulate(mean_draws[:, ::-1], axis=1)[:, ::-1]
    # the best after step i: the horizon's later steps, then what lies past it
    future_max = np.concatenate([future_max[:, 1:], np.full((mean_draws.shape[0], 1), -np.inf)], axis=1)
    best = np.maximum(np.maximum(future_max, after[:, None]), mean_draws)
    return np.mean(best - mean_draws, axis=0)


def _reference_best_beyond_horizon(
    continuation, last_step, plateau, initial, *, counted=None, tolerance=0.0, stop_above=None
):
    SETTLED_SHARE = summary.SETTLED_SHARE  # noqa: N806
    MAX_BEYOND_CELLS = summary.MAX_BEYOND_CELLS  # noqa: N806
    MIN_BEYOND_STEPS = summary.MIN_BEYOND_STEPS  # noqa: N806
    plateau = np.asarray(plateau, dtype=float).reshape(-1)
    n_draws = plateau.size
    counted = np.ones(n_draws, dtype=bool) if counted is None else np.asarray(counted, dtype=bool)
    rise = np.abs(plateau - np.asarray(initial, dtype=float).reshape(-1))
    last = float(np.floor(last_step))
    n = max(min(int(last), MAX_BEYOND_CELLS // max(n_draws, 1)), MIN_BEYOND_STEPS)
    while True:
        with np.errstate(over="ignore", invalid="ignore"):
            m = np.asarray(continuation(last + np.arange(1.0, n + 1.0)), dtype=float)
            span = np.ptp(m[:, n // 2 :], axis=1)
        span = np.where(np.isfinite(span), span, np.inf)
        spread = float(np.mean(span[counted])) if counted.any() else 0.0
        settled = not counted.any() or not spread > max(SETTLED_SHARE * float(np.mean(rise[counted])), tolerance)
        if settled or 2 * n * max(n_draws, 1) > MAX_BEYOND_CELLS or _reference_gain_at_least(m, span, plateau, rise, counted, stop_above):
            break
        n *= 2
    moving = ~(span <= SETTLED_SHARE * rise)
    best = _reference_best_of_look(m, moving, plateau)
    gain_after = 0.0
    if counted.any():
        with np.errstate(invalid="ignore"):
            end = np.where(moving, plateau, m[:, -1])
            gain_after = float(np.max(_reference_expected_remaining_gain(m[counted], plateau[counted], end[counted])))
    return best, gain_after, last + n, 0.0 if settled else spread


def _reference_best_of_look(m, moving, plateau):
    with np.errstate(invalid="ignore"):
        best = np.where(np.isfinite(m).all(axis=1), m.max(axis=1), -np.inf)
    return np.where(moving, np.maximum(best, plateau), best)


def _reference_gain_at_least(m, span, plateau, rise, counted, stop_above):
    if stop_above is None or not counted.any():
        return False
    last_values, threshold = np.asarray(stop_above[0], dtype=float), float(stop_above[1])
    best = _reference_best_of_look(m, ~(span <= summary.SETTLED_SHARE * rise), plateau)
    gain = np.maximum(best, last_values) - last_values
    return bool(np.mean(gain[counted]) >= threshold)


# ----------------------------------------------------------------------------- the cases


def _forecast_rows(n, *, log_zeta, log_w0, seed):
    """Parameter rows ``u`` of :func:`~bayes_grpo.predict.forecast.mean_curve` (plateau, R0, log w0,
    log zeta, log sigma, log onset): ``n`` draws around the given damping and frequency."""
    rng = np.random.default_rng(seed)
    return np.column_stack([
        rng.uniform(0.6, 0.95, n), rng.uniform(0.0, 0.3, n), log_w0 + 0.3 * rng.standard_normal(n),
        log_zeta + 0.3 * rng.standard_normal(n), np.full(n, np.log(0.05)), rng.uniform(0.0, 3.0, n),
    ])  # fmt: skip


def _closed_form_case(u, last, **kwargs):
    return (lambda: (lambda later: mean_curve(u, later)), last, u[:, 0], u[:, 1], kwargs)


def _recursion_case(a, momentum, k_ref, last, *, skip=None, clip_range=None, **kwargs):
    n = a.size
    traj = {"plateau": np.full(n, 0.8), "initial_reward": np.full(n, 0.2), "a": a}

    def make():  # a fresh one each time: the recursion keeps what it simulated
        return continued_trajectories(
            traj, law="recursion", momentum=momentum, k_ref=k_ref, skip=skip, shared={}, clip_range=clip_range
        )

    return (make, last, traj["plateau"], traj["initial_reward"], kwargs)


def _cases():
    rng = np.random.default_rng(3)
    lightly = _forecast_rows(300, log_zeta=np.log(0.02), log_w0=np.log(0.05), seed=1)
    settling = _forecast_rows(200, log_zeta=np.log(1.5), log_w0=np.log(0.5), seed=2)
    mixed = np.vstack([lightly[:100], settling[:100]])
    unstable = mixed.copy()
    unstable[:7, 3] = np.log(1e-4)
    unstable[:7, 2] = np.log(3.0)  # a fast, nearly undamped swing
    unstable_u = np.vstack([unstable, _forecast_rows(5, log_zeta=0.0, log_w0=np.log(0.1), seed=4)])
    unstable_u[-5:, 3] = np.log(-0.0 + 1e-12)  # zeta ~ 0: a swing that never settles
    counted = np.ones(unstable_u.shape[0], dtype=bool)
    counted[rng.choice(unstable_u.shape[0], 30, replace=False)] = False
    a_recursion = rng.uniform(0.002, 0.02, 120)
    a_recursion[:6] = 2.5  # diverging draws
    moderately = _forecast_rows(200, log_zeta=np.log(0.3), log_w0=np.log(0.05), seed=6)
    skip = np.zeros(a_recursion.size, dtype=bool)
    skip[:6] = True
    return {
        "lightly damped, never settling: to the cell budget": _closed_form_case(lightly, 150.0),
        "overdamped, settling in the first look": _closed_form_case(settling, 150.0),
        "moderately damped, settling after some looks": _closed_form_case(moderately, 100.0),
        "mixed, an odd horizon (a first look of odd length)": _closed_form_case(mixed, 301.0),
        "mixed with a tolerance": _closed_form_case(mixed, 150.0, tolerance=1e-3),
        "mixed, stopped by the gain at the horizon": _closed_form_case(
            mixed, 60.0, stop_above=(mean_curve(mixed, np.array([60.0]))[:, 0], 0.02)
        ),
        "a stop threshold never reached": _closed_form_case(
            lightly, 150.0, stop_above=(mean_curve(lightly, np.array([150.0]))[:, 0], 10.0)
        ),
        "undamped and fast draws, some not counted": _closed_form_case(unstable_u, 90.0, counted=counted),
        "no draw counted": _closed_form_case(mixed, 150.0, counted=np.zeros(mixed.shape[0], dtype=bool)),
        "the recursion, diverging draws skipped": _recursion_case(
            a_recursion, 0.9, 3.0, 200.0, counted=~skip, skip=skip
        ),
        "the recursion, clipped, diverging draws counted": _recursion_case(
            rng.uniform(0.002, 0.3, 120), 0.5, 2.0, 100.0, clip_range=(0.8, 1.2)
        ),
        "the recursion, overflowing draws counted": _recursion_case(rng.uniform(0.002, 0.3, 120), 0.9, 3.0, 100.0),
    }


@pytest.fixture
def small_budget(monkeypatch):
    # a cell budget and blocks small enough that every case takes several looks of several blocks
    monkeypatch.setattr(summary, "MAX_BEYOND_CELLS", 1_000_000)
    monkeypatch.setattr(summary, "BLOCK_CELLS", 20_000)


@pytest.mark.parametrize("name", list(_cases()))
def test_following_the_draws_past_the_horizon_gives_the_numbers_of_re_evaluating_every_look(small_budget, name):
    make, last, plateau, initial, kwargs = _cases()[name]
    asked = []

    def counting(cont):
        def ask(steps):
            asked.append(steps.copy())
            return cont(steps)

        return ask

    new = best_beyond_horizon(counting(make()), last, plateau, initial, **kwargs)
    old = _reference_best_beyond_horizon(make(), last, plateau, initial, **kwargs)
    np.testing.assert_array_equal(new[0], old[0])  # best (NaN where NaN)
    # gain after (NaN where NaN: a swing overflowing to inf), last step followed, mean swing
    np.testing.assert_array_equal(np.array(new[1:]), np.array(old[1:]))
    # and each step past the horizon was asked once
    steps = np.concatenate(asked)
    assert np.unique(steps).size == steps.size, name
    np.testing.assert_array_equal(np.sort(steps), last + np.arange(1.0, old[2] - last + 1.0))


def test_the_cases_cover_a_look_to_the_cell_budget_the_gain_stop_and_a_first_look_that_settles(small_budget):
    # what the comparison above rests on: the cases take each way out of the loop
    looks, swings = {}, {}
    for name, (make, last, plateau, initial, kwargs) in _cases().items():
        looks[name] = sizes = []
        cont = make()
        *_, swings[name] = _reference_best_beyond_horizon(
            lambda s, c=cont, seen=sizes: seen.append(s.size) or c(s), last, plateau, initial, **kwargs
        )
    budget = summary.MAX_BEYOND_CELLS
    to_budget = "lightly damped, never settling: to the cell budget"
    assert 2 * looks[to_budget][-1] * 300 > budget and swings[to_budget] > 0
    assert len(looks["overdamped, settling in the first look"]) == 1
    later = "moderately damped, settling after some looks"
    assert len(looks[later]) > 2 and swings[later] == 0.0
    gain_stop = "mixed, stopped by the gain at the horizon"
    assert len(looks[gain_stop]) == 1 and swings[gain_stop] > 0  # the gain stop, not a settle
    assert len(looks["the recursion, clipped, diverging draws counted"]) >= 3
    overflowing = swings["the recursion, overflowing draws counted"]
    assert np.isnan(overflowing) or overflowing == np.inf


def test_each_doubled_look_asks_the_continuation_only_for_its_new_steps():
    # a look that doubled re-evaluated every step from the horizon's next one: a lightly damped
    # forecast (1000 draws from step 150) walked to the cell budget (2e7 cells) asking 3.8e7, 6.6
    # of the 8.6 s of a tiny forecast. Each step is now asked once; the default budget here
    u = _forecast_rows(1000, log_zeta=np.log(0.01), log_w0=np.log(0.05), seed=5)
    asked = []

    def continuation(steps):
        asked.append(steps.size)
        return mean_curve(u, steps)

    *_, reached, swing = best_beyond_horizon(continuation, 150.0, u[:, 0], u[:, 1])
    assert swing > 0  # not settled: the look went to the budget
    assert sum(asked) == reached - 150.0 <= summary.MAX_BEYOND_CELLS / 1000
    assert max(asked) * 1000 <= max(summary.BLOCK_CELLS, 1000 * summary.MIN_BLOCK_COLUMNS) * 2


def test_the_blocks_of_a_look_cover_it_once_with_no_block_of_one_column(monkeypatch):
    # NumPy sums one column's draws pairwise and several columns' in order: a block of one column
    # would give its step's mean gain other last bits than the whole look
    monkeypatch.setattr(summary, "BLOCK_CELLS", 1000)
    for n_columns in (1, 2, 63, 64, 65, 127, 128, 129, 1000, 1001, 6400, 6401, 6463):
        for n_rows in (1, 7, 10, 1000, 5000):
            blocks = summary._column_blocks(n_columns, n_rows)
            assert [a for a, _ in blocks][1:] == [b for _, b in blocks][:-1]
            assert blocks[0][0] == 0 and blocks[-1][1] == n_columns
            assert all(b - a >= min(n_columns, summary.MIN_BLOCK_COLUMNS) for a, b in blocks)


def test_a_forecasts_policy_look_past_the_horizon_computes_only_the_steps_the_logged_rewards_did_not(monkeypatch):
    # the policy's look (steps t + lag) evaluated the closed form again at the steps the logged
    # reward's look had just evaluated: a lightly damped forecast to the cell budget twice over.
    # forecast.kept_curve keeps each step's column: the same numbers as mean_curve
    from bayes_grpo.predict import forecast

    u = _forecast_rows(200, log_zeta=np.log(0.01), log_w0=np.log(0.05), seed=8)
    computed = []

    def counted_curve(rows, steps, bounds=None):
        computed.append(np.size(steps))
        return mean_curve(rows, steps, bounds)

    monkeypatch.setattr(forecast, "mean_curve", counted_curve)
    curve = forecast.kept_curve(u)
    lag = 2.0
    logged = best_beyond_horizon(curve, 150.0, u[:, 0], u[:, 1])
    asked_logged = sum(computed)
    policy = best_beyond_horizon(lambda later: curve(later + lag), 150.0, u[:, 0], u[:, 1])
    assert logged[2] == policy[2]  # both looks to the same step
    assert sum(computed) - asked_logged == lag  # the policy's look: only the last lag steps new
    # and the numbers of the closed form at each step, asked in any order and with repeats
    steps = np.concatenate([150.0 + np.arange(1.0, 40.0), [400.0, 151.0, 151.0, 1e4]])[::-1]
    np.testing.assert_array_equal(curve(steps), mean_curve(u, steps))
    # a bounded reward's curve (the oscillator on the latent level) is kept the same way
    rates = u.copy()
    rates[:, :2] = np.clip(rates[:, :2], 0.05, 0.95)
    np.testing.assert_array_equal(forecast.kept_curve(rates, (0.0, 1.0))(steps), mean_curve(rates, steps, (0.0, 1.0)))
    monkeypatch.undo()
    plain = best_beyond_horizon(lambda later: mean_curve(u, later + lag), 150.0, u[:, 0], u[:, 1])
    np.testing.assert_array_equal(policy[0], plain[0])
    np.testing.assert_array_equal(np.array(policy[1:]), np.array(plain[1:]))
