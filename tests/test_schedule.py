"""Learning-rate schedules: Hugging Face's multipliers, the recursion and the bandit on a
schedule, and prediction of a run on a schedule (``predict --lr-schedule``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from bayes_grpo.dynamics.coefficients import damping_ratio, oscillator_coefficients
from bayes_grpo.dynamics.schedule import lr_multipliers, schedule_clock
from bayes_grpo.dynamics.simulate import simulate_recursion
from bayes_grpo.dynamics.trajectory import reward_trajectory
from bayes_grpo.predict.predict import predict_run
from bayes_grpo.predict.summary import attr_warnings


def test_multipliers_follow_hugging_face_schedules():
    # transformers.get_scheduler: warm-up n / W, then linear (T - n) / (T - W) or cosine
    warm, total = 4, 12
    linear = lr_multipliers("linear", 14, warmup_steps=warm, decay_steps=total)
    np.testing.assert_allclose(linear[:5], [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(linear[5:], [7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8, 0, 0])
    cosine = lr_multipliers("cosine", 12, warmup_steps=warm)
    n = np.arange(warm, 12)
    np.testing.assert_allclose(cosine[warm:], 0.5 * (1 + np.cos(np.pi * (n - warm) / (12 - warm))))
    np.testing.assert_allclose(lr_multipliers("constant", 6, warmup_steps=2), [0, 0.5, 1, 1, 1, 1])
    np.testing.assert_allclose(lr_multipliers("linear", 4), [1, 0.75, 0.5, 0.25])
    np.testing.assert_allclose(schedule_clock([0.0, 0.5, 1.0]), [0, 0, 0.5, 1.5])


@pytest.mark.parametrize(
    ("kind", "hf_kind"), [("constant", "constant_with_warmup"), ("linear", "linear"), ("cosine", "cosine")]
)
def test_multipliers_are_the_rates_transformers_gives_each_update_up_to_the_decay_length(kind, hf_kind):
    # against transformers itself; with a warm-up, "constant" is its constant_with_warmup (its
    # plain "constant" ignores warmup_steps), and past T its cosine rises again where ours stays 0
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    warm, total = 3, 11
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=1.0)
    sched = transformers.get_scheduler(hf_kind, opt, num_warmup_steps=warm, num_training_steps=total)
    rates = []
    for _ in range(total):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    ours = lr_multipliers(kind, total, warmup_steps=warm, decay_steps=None if kind == "constant" else total)
    np.testing.assert_allclose(ours, rates, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kind="step"), "unknown learning-rate schedule"),
        (dict(kind="linear", warmup_steps=-1), "warmup_steps"),
        (dict(kind="linear", warmup_steps=10, decay_steps=10), "above the warm-up"),
        # without decay_steps the message named it, with the horizon as its value
        (dict(kind="cosine", warmup_steps=20), r"warmup_steps \(20\) must end before n_updates \(20\)"),
        (dict(kind="linear", n_updates=0), "at least 1 update"),
    ],
)
def test_impossible_schedules_are_refused_by_name(kwargs, match):
    args = {"n_updates": 20, **kwargs}
    with pytest.raises(ValueError, match=match):
        lr_multipliers(args.pop("kind"), args.pop("n_updates"), **args)


@pytest.mark.parametrize(
    "name, value",
    [
        ("n_updates", 10.5), ("n_updates", True), ("n_updates", float("nan")),
        ("warmup_steps", True), ("warmup_steps", float("nan")),
        ("decay_steps", True), ("decay_steps", float("nan")), ("decay_steps", 30.5),
    ],
)  # fmt: skip
def test_a_schedule_length_that_is_no_whole_number_is_refused_by_name(name, value):
    # int(n_updates) described 10.5 updates as 10 and True as 1, and NaN failed in "cannot
    # convert float NaN to integer"; warmup_steps=True was a warm-up of one update
    args = {"n_updates": 20, name: value}
    with pytest.raises(ValueError, match=rf"^{name} must be a whole number"):
        lr_multipliers("linear", args.pop("n_updates"), **args)
    # a whole number of any type describes the schedule it did
    np.testing.assert_array_equal(
        lr_multipliers("linear", 20.0, warmup_steps=np.int64(2), decay_steps=30.0),
        lr_multipliers("linear", 20, warmup_steps=2, decay_steps=30),
    )


def test_without_momentum_or_lag_the_error_shrinks_by_one_minus_the_gain_of_each_update():
    a, e0 = 0.05, -0.6
    m = lr_multipliers("linear", 60, warmup_steps=10)
    e = simulate_recursion(a, 0.0, 0, 60, e0=e0, lr_multipliers=m)[0]
    np.testing.assert_allclose(e, e0 * np.concatenate([[1.0], np.cumprod(1 - a * m)]), rtol=1e-12)


def test_on_a_schedule_the_momentum_buffer_does_not_see_the_rate_as_in_torch_sgd():
    torch = pytest.importorskip("torch")
    a, mu, lag, e0, n = 0.04, 0.9, 2, -0.5, 80
    m = lr_multipliers("cosine", n, warmup_steps=8)
    # torch's SGD on the quadratic loss a e^2 / 2 (gradient a e) at the lagged error
    hist = [torch.tensor([e0], dtype=torch.float64) for _ in range(lag + 1)]
    p = torch.nn.Parameter(torch.tensor([e0], dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=1.0, momentum=mu)
    out = [e0]
    for k in range(n):
        opt.param_groups[0]["lr"] = float(m[k])
        p.grad = a * hist[-1 - lag].clone()
        opt.step()
        hist.append(p.detach().clone())
        out.append(p.item())
    got = simulate_recursion(a, mu, lag, n, e0=e0, lr_multipliers=m)[0]
    np.testing.assert_allclose(got, out, rtol=1e-10, atol=1e-14)
    constant = simulate_recursion(a, mu, lag, n, e0=e0)[0]
    np.testing.assert_allclose(simulate_recursion(a, mu, lag, n, e0=e0, lr_multipliers=np.ones(n))[0], constant)


def test_a_bandit_run_on_a_schedule_logs_its_rate_and_stops_moving_when_the_rate_is_zero():
    from bayes_grpo.bandit import simulate_bandit

    m = np.concatenate([lr_multipliers("linear", 30, warmup_steps=5), np.zeros(20)])
    ds = simulate_bandit(k_ref=2, momentum=0.5, learning_rate=0.2, seeds=3, steps=50, lr_multipliers=m)
    np.testing.assert_allclose(ds["lr"].values, 0.2 * np.broadcast_to(m, (3, 50)))
    p = ds["expected_reward"].values
    assert np.all(np.abs(np.diff(p[:, 33:], axis=1)) < 1e-15)  # frozen 2 (lag) + 1 steps on
    assert np.all(np.abs(p[:, 20] - p[:, 0]) > 0.01)  # and it did move before
    same = simulate_bandit(k_ref=2, momentum=0.5, learning_rate=0.2, seeds=3, steps=50, lr_multipliers=np.ones(50))
    plain = simulate_bandit(k_ref=2, momentum=0.5, learning_rate=0.2, seeds=3, steps=50)
    np.testing.assert_array_equal(same["reward"].values, plain["reward"].values)


class _Fitted:
    """A mechanistic posterior stub: gain ``a = K lr`` with ``K`` drawn around 0.05."""

    runset = None

    def __init__(self, momentum=0.5, k_ref=2.0):
        rng = np.random.default_rng(0)
        self.stiffness = rng.normal(0.05, 0.003, size=(2, 60))
        self.momentum, self.k_ref = momentum, k_ref

    def coefficient_draws(self, *, learning_rate, **_):
        a = self.stiffness * learning_rate
        m, c, k = oscillator_coefficients(a, self.momentum, self.k_ref)
        full = lambda v: np.full(a.shape, v)  # noqa: E731
        data = {"a": a, "M_eff": m, "C_eff": c, "K_eff": k, "zeta": damping_ratio(m, c, k),
                "plateau": full(0.8), "initial_reward": full(0.2), "noise_d": full(0.0), "sigma": full(0.02)}  # fmt: skip
        return xr.Dataset({name: (("chain", "draw"), np.array(v)) for name, v in data.items()})


def _predict(lr, schedule=None, law="auto", steps=120):
    return predict_run(
        _Fitted(), learning_rate=lr, momentum=0.5, k_ref=2, group_size=8, steps=steps,
        discrepancy=False, law=law, lr_schedule=schedule,
    )  # fmt: skip


def test_a_scheduled_prediction_runs_the_recursion_on_the_schedule():
    steps = 120
    m = lr_multipliers("linear", steps, warmup_steps=12)
    ds = _predict(1.0, m)
    fitted = _Fitted()
    a = fitted.stiffness.reshape(-1)
    err = simulate_recursion(a, 0.5, 2, steps, e0=np.full(a.size, -0.6), lr_multipliers=m)
    lagged = np.concatenate([np.zeros((a.size, 2)) + err[:, :1], err[:, :-2]], axis=1)
    np.testing.assert_allclose(ds["mean_mean"].values, 0.8 + lagged.mean(axis=0), rtol=1e-10)
    constant = _predict(1.0)
    # the warm-up leaves the run behind where the constant rate takes it
    assert ds["mean_mean"].values[10] < constant["mean_mean"].values[10] - 0.2
    settings = json.loads(ds.attrs["settings"])
    assert settings["lr_schedule"] == "custom" and settings["lr_schedule_peak_rate"] == 1.0
    # the rates predicted on are kept with the prediction (a file's rates too), NaN at step T
    np.testing.assert_allclose(ds["lr_multiplier"].values[:-1], m)
    from bayes_grpo.predict.result import prediction_result

    assert "lr_schedule=custom (peak 1.0):" in prediction_result(ds).summary  # as the report shows it
    assert np.isnan(ds["lr_multiplier"].values[-1]) and "lr_multiplier" not in constant


def test_a_schedule_below_the_nominal_rate_is_judged_at_its_peak():
    # lr 2 at half rate throughout is the run at lr 1: same trajectory, regime and stability
    half = _predict(2.0, np.full(120, 0.5))
    plain = _predict(1.0)
    np.testing.assert_allclose(half["mean_mean"].values, plain["mean_mean"].values, rtol=1e-12)
    for key in ("regime", "prob_unstable_closed_form", "prob_unstable_exact", "stop_step"):
        assert half.attrs[key] == plain.attrs[key]
    assert any("peaks at 1" in w for w in attr_warnings(half))


def test_the_continuous_law_is_read_on_the_schedule_clock():
    m = lr_multipliers("cosine", 120, warmup_steps=10)
    ds = _predict(1.0, m, law="continuous")
    fitted = _Fitted()
    mass, damp, k_eff = oscillator_coefficients(fitted.stiffness.reshape(-1), 0.5, 2.0)
    tau = schedule_clock(m)
    want = reward_trajectory(tau[None, :], mass[:, None], damp[:, None], k_eff[:, None], 0.8, 0.2)
    np.testing.assert_allclose(ds["mean_mean"].values, want.mean(axis=0), rtol=1e-10)
    assert "schedule's clock" in ds.attrs["law_reason"]


def test_a_schedule_shorter_than_the_horizon_or_zero_throughout_is_refused():
    with pytest.raises(ValueError, match="covers 50 updates, fewer than the 120"):
        _predict(1.0, np.ones(50))
    with pytest.raises(ValueError, match="0 at every update"):
        _predict(1.0, np.zeros(120))


@pytest.fixture
def predict_cli(monkeypatch):
    """``predict_cli(*options, lr="1", steps="100")``: the exit status of ``bayes-grpo predict``
    of the :class:`_Fitted` posterior (mu 0.5, K_ref 2, G 8, no discrepancy) with ``options``."""
    from bayes_grpo.cli import main

    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda posterior, **kw: (_Fitted(), []))

    def run(*options: str, lr: str = "1", steps: str = "100") -> int:
        return main(["predict", "fit.nc", "--lr", lr, "--momentum", "0.5", "--k-ref", "2",
                     "--group-size", "8", "--steps", steps, "--no-discrepancy", *options])  # fmt: skip

    return run


def test_cli_predict_on_a_named_schedule_and_on_a_schedule_file(tmp_path, capsys, predict_cli):
    base = ["--json"]
    assert predict_cli(*base, "--lr-scheduler", "linear", "--warmup-steps", "10", "--decay-steps", "200") == 0
    named = json.loads(capsys.readouterr().out)  # --lr-scheduler: train's name for the flag
    assert named["lr_schedule"] == "linear, warm-up 10, decay to step 200"
    assert named["lr_schedule_peak_rate"] == 1.0
    schedule = tmp_path / "lr.csv"
    steps = np.arange(100)
    rate = lr_multipliers("linear", 100, warmup_steps=10, decay_steps=200)
    schedule.write_text("step,lr\n" + "".join(f"{s},{r}\n" for s, r in zip(steps, rate)))
    assert predict_cli(*base, "--lr-schedule", str(schedule)) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_file["stop_step"] == named["stop_step"]
    assert from_file["time_to_fraction"] == named["time_to_fraction"]
    assert from_file["lr_schedule"] == str(schedule)
    assert predict_cli(*base) == 0
    constant = json.loads(capsys.readouterr().out)
    assert constant["time_to_fraction"] != named["time_to_fraction"] and "lr_schedule" not in constant

    short = tmp_path / "short.csv"
    short.write_text("step,lr\n0,1\n50,1\n")
    assert predict_cli(*base, "--lr-schedule", str(short)) != 0
    err = capsys.readouterr().err
    assert "short.csv: the schedule ends at step 50" in err
    bad = tmp_path / "bad.csv"
    bad.write_text("step,rate\n0,1\n")
    assert predict_cli(*base, "--lr-schedule", str(bad)) != 0
    assert "bad.csv: a schedule file needs columns step and lr" in capsys.readouterr().err
    for header in ("step,lr,LR", "step,lr,learning_rate"):  # the later column silently won
        two = tmp_path / "two.csv"
        two.write_text(header + "\n" + "".join(f"{s},1,0.5\n" for s in range(101)))
        assert predict_cli(*base, "--lr-schedule", str(two)) != 0
        assert "two.csv: columns" in capsys.readouterr().err
    assert predict_cli(*base, "--lr-schedule", "cosin") != 0
    assert "neither a schedule (constant, linear, cosine) nor a file" in capsys.readouterr().err


def test_a_schedule_file_starting_after_update_0_is_refused_not_carried_back(tmp_path, capsys, predict_cli):
    # np.interp held the first rate flat before the file's first step: a file from step 5 was
    # read as a run at that rate from update 0
    late = tmp_path / "late.csv"
    late.write_text("step,lr\n5,1\n100,1\n")
    assert predict_cli("--lr-schedule", str(late)) != 0
    assert "late.csv: the schedule starts at step 5; the horizon needs the rate from update 0" in capsys.readouterr().err


def test_a_bad_row_of_a_schedule_file_is_quoted_as_written_not_as_numpy_reprs(tmp_path):
    import argparse

    from bayes_grpo.cli._common import lr_schedule_from_args

    bad = tmp_path / "nan.csv"
    bad.write_text("step,lr\n0,0.1\n5,nan\n10,0\n")
    args = argparse.Namespace(lr_schedule=str(bad), warmup_steps=0, decay_steps=None)
    with pytest.raises(ValueError) as err:
        lr_schedule_from_args(args, 0.1, 10)
    assert "nan.csv: row 3 has step 5, lr nan; each row needs" in str(err.value)
    assert "np." not in str(err.value)


def test_a_constant_schedule_has_no_decay_length_with_or_without_a_warm_up(tmp_path, capsys, predict_cli):
    # a warm-up outlasting the horizon was refused for a decay length constant does not have,
    # and --decay-steps after a warm-up was ignored (labelled "decay to step 50") where without
    # one it was refused
    np.testing.assert_allclose(lr_multipliers("constant", 4, warmup_steps=8), [0, 1 / 8, 2 / 8, 3 / 8])
    with pytest.raises(ValueError, match="constant does not decay"):
        lr_multipliers("constant", 10, warmup_steps=2, decay_steps=50)
    base = ["--json", "--lr-schedule", "constant"]
    assert predict_cli(*base, "--warmup-steps", "200") == 0
    assert json.loads(capsys.readouterr().out)["time_to_fraction"]
    for warm in ("0", "10"):
        assert predict_cli(*base, "--warmup-steps", warm, "--decay-steps", "50") != 0
        assert "--decay-steps needs --lr-schedule linear or cosine" in capsys.readouterr().err


def test_a_decay_not_after_the_warm_up_is_refused_naming_the_options(tmp_path, capsys, predict_cli):
    # the message was lr_multipliers' "decay_steps must be ... above the warm-up (200), got 100",
    # naming a parameter the command line does not have and a value nobody gave
    base = ["--lr-schedule", "cosine", "--warmup-steps", "200"]
    assert predict_cli(*base) != 0
    err = capsys.readouterr().err
    assert "--lr-schedule cosine: --warmup-steps 200 does not end before the horizon (100 updates)" in err
    assert "give --decay-steps" in err and "decay_steps" not in err
    assert predict_cli(*base, "--decay-steps", "150") != 0
    assert "--decay-steps 150 must exceed --warmup-steps 200" in capsys.readouterr().err
    assert predict_cli(*base, "--decay-steps", "300") == 0


def test_a_schedule_file_with_a_non_positive_lr_is_refused_naming_lr(tmp_path, capsys, predict_cli):
    # the file's rates were divided by --lr 0: a RuntimeWarning and "update 0 has np.float64(inf)"
    from bayes_grpo.dynamics.schedule import check_multipliers

    rates = tmp_path / "rates.csv"
    rates.write_text("step,lr\n0,0.2\n10,0.2\n")
    # since 2026-12-05 predict's --lr is refused by argparse before the file is read
    for lr in ("0", "-0.1"):
        with pytest.raises(SystemExit) as done:
            predict_cli("--lr-schedule", str(rates), lr=lr, steps="10")
        assert done.value.code == 2
        assert f"argument --lr/--learning-rate: must be above 0, got '{lr}'" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"update 1 has inf$"):
        check_multipliers([1.0, np.inf], 2)


def test_cli_a_schedule_file_at_rate_0_over_the_horizon_is_refused_naming_the_file(tmp_path, capsys, predict_cli):
    zero = tmp_path / "zero.csv"
    zero.write_text("step,lr\n0,0\n10,0\n20,1\n")
    assert predict_cli("--lr-schedule", str(zero), steps="10") != 0
    assert f"--lr-schedule {zero}: the rate is 0 at every update of the horizon (--steps 10)" in capsys.readouterr().err


def test_a_prediction_from_a_fit_of_scheduled_runs_says_its_gain_averages_over_them():
    # the fit noted it; a prediction from the saved posterior said nothing of it
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.runset.clock import clock_runset

    scheduled = simulate_bandit(k_ref=2, momentum=0.5, seeds=1, steps=60, lr_multipliers=lr_multipliers("linear", 60, warmup_steps=6))
    fitted = _Fitted()
    fitted.runset = scheduled
    note = [w for w in attr_warnings(_predict_from(fitted)) if "log a learning-rate schedule" in w]
    assert len(note) == 1 and "were fitted with the constant-rate law" in note[0] and "seed=0 (lr 0 to 0.1)" in note[0]
    # a fit whose i.i.d. likelihood followed the logged schedules (model version 7) describes its
    # runs' learning_rate; the state-space likelihood does not follow them
    fitted.model_config, fitted.likelihood = {"learning_rate_schedule": {"follow": True}}, "iid"
    assert not any("learning-rate schedule" in w for w in attr_warnings(_predict_from(fitted)))
    fitted.likelihood = "state_space"
    assert any("were fitted with the constant-rate law" in w for w in attr_warnings(_predict_from(fitted)))
    del fitted.model_config, fitted.likelihood
    fitted.runset = clock_runset(scheduled)  # re-timed: a run at its constant rate
    assert not any("learning-rate schedule" in w for w in attr_warnings(_predict_from(fitted)))
    fitted.runset = simulate_bandit(k_ref=2, momentum=0.5, seeds=1, steps=60)  # at a constant rate
    assert not any("learning-rate schedule" in w for w in attr_warnings(_predict_from(fitted)))


def _predict_from(fitted):
    return predict_run(fitted, learning_rate=1.0, momentum=0.5, k_ref=2, group_size=8, steps=60, discrepancy=False)


def test_stability_from_a_fit_of_scheduled_runs_says_its_verdict_is_for_a_constant_rate(monkeypatch, capsys):
    # the fit noted the schedules; `stability --posterior` from the saved posterior did not
    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.checks.stability import stability_from_posterior
    from bayes_grpo.cli import main

    fitted = _Fitted()
    fitted.runset = simulate_bandit(k_ref=2, momentum=0.5, seeds=1, steps=60, lr_multipliers=lr_multipliers("cosine", 60))
    setting = dict(learning_rate=1.0, momentum=0.5, momentum_convention="heavy_ball", k_ref=2)
    assert len(stability_from_posterior(fitted, **setting).values["scheduled_runs"]) == 1
    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (fitted, []))
    assert main(["stability", "--posterior", "fit.nc", "--lr", "1", "--momentum", "0.5", "--convention", "heavy_ball", "--k-ref", "2"]) == 0
    assert "log a learning-rate schedule and were fitted with the constant-rate law" in capsys.readouterr().err
    fitted.runset = simulate_bandit(k_ref=2, momentum=0.5, seeds=1, steps=60)
    assert stability_from_posterior(fitted, **setting).values["scheduled_runs"] == []


def test_an_answer_for_one_fitted_llm_names_only_its_own_scheduled_runs(monkeypatch, capsys):
    """QA flow on two LLMs, one trained with a warm-up: `predict fit.nc --model B ...` and
    `stability --posterior fit.nc --model B ...` warned that the fit's runs of LLM A "log a
    learning-rate schedule ... its gain averages over their schedules", of B's gain, which is
    B's own curvature. An answer for a fitted LLM now names that LLM's scheduled runs only; one for
    a new LLM (the population level) names them all."""
    from types import SimpleNamespace

    from bayes_grpo.bandit import simulate_bandit
    from bayes_grpo.checks.stability import stability_from_posterior
    from bayes_grpo.cli import main

    runs = simulate_bandit(k_ref=2, momentum=0.5, seeds=2, steps=60, lr_multipliers=lr_multipliers("linear", 60, warmup_steps=6))
    runs["lr"][1] = float(runs["lr"][1].max())  # run 1 at a constant rate
    runs = runs.assign_coords(model=("run", ["A", "B"]))
    scheduled_id = str(runs.run.values[0])

    class Fitted(_Fitted):
        llm = None

        def coefficient_draws(self, **kw):
            draws = super().coefficient_draws(**kw)
            draws.attrs.update({"model": self.llm or "", "new_model": str(self.llm is None)})
            return draws

        def _require_fit(self):
            return SimpleNamespace(posterior={})  # no regression on model size

    fitted = Fitted()
    fitted.runset, fitted.data = runs, SimpleNamespace(models=["A", "B"])

    def schedule_notes():
        return [w for w in attr_warnings(_predict_from(fitted)) if "log a learning-rate schedule" in w]

    fitted.llm = "B"
    assert schedule_notes() == []
    for llm in ("A", None):  # its own scheduled run; a new LLM's answer rests on every run
        fitted.llm = llm
        (note,) = schedule_notes()
        assert scheduled_id in note
    setting = dict(learning_rate=1.0, momentum=0.5, momentum_convention="heavy_ball", k_ref=2)
    assert stability_from_posterior(fitted, model="B", **setting).values["scheduled_runs"] == []
    assert len(stability_from_posterior(fitted, model="A", **setting).values["scheduled_runs"]) == 1
    with pytest.warns(UserWarning, match="not in the fit"):
        assert len(stability_from_posterior(fitted, model="new", **setting).values["scheduled_runs"]) == 1
    monkeypatch.setattr("bayes_grpo.model.core.as_fitted_model", lambda path, **kw: (fitted, []))
    argv = ["stability", "--posterior", "fit.nc", "--lr", "1", "--momentum", "0.5", "--convention", "heavy_ball", "--k-ref", "2"]
    assert main([*argv, "--model", "B"]) == 0
    assert "learning-rate schedule" not in capsys.readouterr().err


def test_a_stop_step_past_a_decaying_schedule_says_it_takes_the_last_rate_for_later_updates():
    # past the horizon the schedule is continued at its last rate (a schedule decaying to 0
    # freezes the run): only a docstring said so, while the stop step rests on it
    steps = 120
    decaying = _predict(1.0, lr_multipliers("linear", steps, warmup_steps=12))  # 1/108 at update 119
    notes = [n for n in attr_warnings(decaying) if "schedule's last rate" in n]
    assert len(notes) == 1 and "0.00926 of its peak" in notes[0] and "frozen" not in notes[0], notes
    assert "expected_remaining_gain_after" in decaying.attrs
    ended = _predict(1.0, np.concatenate([np.linspace(1.0, 0.0, 100), np.zeros(steps - 100)]))
    assert any("last rate, 0 of its peak" in n and "frozen" in n for n in attr_warnings(ended)), attr_warnings(ended)
    half = _predict(1.0, np.linspace(1.0, 0.5, steps))
    assert any("schedule's last rate, 0.5 of its peak" in n for n in attr_warnings(half)), attr_warnings(half)
    # a schedule at its peak to the end, and no schedule: nothing to say
    for ds in (_predict(2.0, np.full(steps, 0.5)), _predict(1.0)):
        assert not any("schedule's last rate" in n for n in attr_warnings(ds))
