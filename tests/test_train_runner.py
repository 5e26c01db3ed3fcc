"""A real (short) GRPO run of the tiny offline model through TRL, ingested into a run set."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

pytest.importorskip("trl")

from bayes_grpo.runset.core import runset_warnings  # noqa: E402
from bayes_grpo.runset.ingest import load_runs  # noqa: E402
from bayes_grpo.runset.names import canonical_name  # noqa: E402
from bayes_grpo.runset.schema import NUMERIC_COORDS, STRING_COORDS  # noqa: E402
from bayes_grpo.train import TrainConfig, read_run_dir, run_training  # noqa: E402
from bayes_grpo.train.adapter import METRIC_NAMES  # noqa: E402

pytestmark = pytest.mark.train

G = 8
K_REF = 2
STEPS = 40
CONFIG = TrainConfig(
    group_size=G,
    prompts_per_step=8,
    learning_rate=1e-2,  # fast enough that the tiny model learns within STEPS
    k_ref=K_REF,
    max_steps=STEPS,
    seed=0,
    # the prompt set this run was chosen on (STEPS x prompts + one rollout, the default before
    # NEXT_DIGIT_PROMPTS): with it, groups with reward spread come early enough for the tests
    n_prompts=STEPS * 8 + 8 * K_REF,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("train") / "tiny_k2_s0"
    result = run_training(CONFIG, out, threads=1)
    frame, meta = read_run_dir(out)
    return result, frame, meta


def test_run_directory_holds_logs_and_metadata_but_no_weights(run):
    result, _, meta = run
    files = sorted(p.name for p in result.run_dir.iterdir())
    assert files == ["bayes_grpo_run.json", "trainer_state.json"]
    assert meta["model"] == "tiny-gpt2" and 50_000 < meta["model_size"] < 200_000
    assert meta["group_size"] == G and meta["k_ref"] == K_REF and meta["prompts_per_step"] == 8
    assert meta["momentum_convention"] == "ema" and meta["momentum"] == 0.9
    assert meta["k_ref_mapping"]["steps_per_generation"] == K_REF
    # TRL's defaults the run trained with are recorded: gradient clipping at norm 1, DAPO's loss
    assert (
        meta["trl_settings"]["max_grad_norm"] == 1.0 and meta["trl_settings"]["loss_type"] == "dapo"
    )
    assert json.loads((result.run_dir / "bayes_grpo_run.json").read_text()) == meta


def test_the_torch_thread_count_a_seeds_rewards_depend_on_is_recorded(run, tmp_path):
    # the same seed trained with --threads 1 and --threads 2 (the README's settings, 80 steps)
    # logged other grad norms from step 30 and other rewards from step 73 (float sums in another
    # order), and bayes_grpo_run.json, with the full config and the library versions, did not
    # say which the run had
    import torch

    assert run[2]["torch_threads"] == 1  # threads=1
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=1)
    meta = run_training(cfg, tmp_path / "default").metadata
    assert meta["torch_threads"] == torch.get_num_threads()  # torch's own choice, left as it was


def test_short_run_ingests_into_a_runset_with_every_coordinate_filled(run):
    result, _, _ = run
    ds = load_runs([result.run_dir])
    assert ds.sizes["run"] == 1
    for name in NUMERIC_COORDS:
        assert np.isfinite(ds[name].values).all(), name
    for name in STRING_COORDS:
        assert all(str(v) for v in ds[name].values), name
    assert float(ds["group_size"][0]) == G and float(ds["k_ref"][0]) == K_REF
    assert (
        float(ds["learning_rate"][0]) == 1e-2 and str(ds["momentum_convention"].values[0]) == "ema"
    )
    # the callback's metrics are in the run set under their canonical names, on every step
    for name in METRIC_NAMES:
        assert np.isfinite(ds[canonical_name(name)].values).sum() == STEPS, name
    # TRL logs the reward on generation steps only: every K_ref-th step
    assert np.isfinite(ds["reward"].values).sum() == STEPS // K_REF


def test_logged_reward_is_a_mean_over_the_completions_per_step_coordinate(run):
    # K_REF = 2 via steps_per_generation: one rollout of K_REF x 8 prompts x G completions
    result, _, _ = run
    ds = load_runs([result.run_dir])
    n = float(ds["completions_per_step"][0])
    assert n == K_REF * 8 * G
    counts = ds["reward"].values[0][np.isfinite(ds["reward"].values[0])] * n
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)


def test_callback_logs_dynamics_metrics_on_every_step(run):
    _, frame, _ = run
    assert len(frame) == STEPS
    for name in METRIC_NAMES:
        assert frame[name].notna().all(), name
    lag = frame["dynamics/policy_lag"].to_numpy()
    np.testing.assert_array_equal(lag, np.arange(STEPS) % K_REF)


def test_zero_spread_share_matches_trls_own_count_on_generation_steps(run):
    _, frame, _ = run
    gen = frame[frame["reward"].notna()]
    np.testing.assert_allclose(
        gen["dynamics/frac_zero_spread_groups"], gen["frac_reward_zero_std"], atol=1e-12
    )


def test_advantage_variance_is_that_of_group_normalised_advantages(run):
    # every non-degenerate group's advantages (r - mean) / (std_unbiased + 1e-4) have population
    # variance (G - 1) / G; degenerate groups contribute zeros
    _, frame, _ = run
    zero = frame["dynamics/frac_zero_spread_groups"].to_numpy()
    expected = (1 - zero) * (G - 1) / G
    np.testing.assert_allclose(frame["dynamics/advantage_var"], expected, rtol=2e-3, atol=1e-12)


def test_importance_ratios_are_one_on_policy_and_spread_once_the_policy_moves(run):
    _, frame, _ = run
    lag = frame["dynamics/policy_lag"]
    fresh, stale = frame[lag == 0], frame[lag == 1]
    np.testing.assert_allclose(fresh["dynamics/is_ratio_mean"], 1.0, atol=1e-6)
    np.testing.assert_allclose(fresh["dynamics/is_ratio_std"], 0.0, atol=1e-6)
    # Before the first group with reward spread every advantage is 0, Adam's update is exactly 0
    # and stale data are still on-policy; from that rollout on, stale ratios spread.
    zero = frame["dynamics/frac_zero_spread_groups"]
    first = zero.index[(zero < 1).to_numpy()][0]
    assert first < STEPS - K_REF, "no group ever had reward spread: nothing to test"
    np.testing.assert_array_equal(stale.loc[stale.index < first, "dynamics/is_ratio_std"], 0.0)
    moved = stale.loc[stale.index > first, "dynamics/is_ratio_std"]
    assert (moved > 1e-3).all(), moved
    assert (frame["dynamics/is_ratio_min"] <= frame["dynamics/is_ratio_mean"]).all()
    assert (frame["dynamics/is_ratio_mean"] <= frame["dynamics/is_ratio_max"]).all()


def test_the_final_reward_is_said_as_a_mean_beside_ingests_last_reward(run):
    # train printed "final reward 0.312" (the mean of the last 10% of logged rewards) where
    # ingest printed r_last 0.25 (the last logged reward) for the same run, neither saying which
    from bayes_grpo.cli.train import _final_reward_text
    from bayes_grpo.runset.ingest import runset_summary

    result, frame, _ = run
    rewards = frame["reward"].dropna()  # every K_REF-th step: 1, 3, ..., 39
    first, last = result.final_reward_steps
    assert (first, last) == (rewards.index[-2], rewards.index[-1]) == (STEPS - 3, STEPS - 1)
    assert result.final_reward == pytest.approx(rewards.loc[first:last].mean())
    summary = runset_summary(load_runs([result.run_dir]))
    assert result.last_reward == summary["reward_last"].iloc[0] == rewards.iloc[-1]
    text = _final_reward_text(result)
    assert text == (
        f"final reward {result.final_reward:.3f} (mean of the rewards logged at steps "
        f"{first}..{last}; the last, ingest's r_last: {result.last_reward:.3f})"
    )


def test_the_final_and_last_rewards_leave_out_a_reward_logged_as_nan_as_ingest_does():
    # a reward function returning inf (TRL logs the mean: inf or NaN) made last_reward NaN
    # beside ingest's r_last, the last finite reward, and the mean over the last rewards NaN
    import math

    from bayes_grpo.train.runner import _final_reward

    history = [{"step": s, "reward": r} for s, r in enumerate([0.1, 0.2, 0.3, math.nan], 1)]
    assert _final_reward([*history, {"step": 4, "train_runtime": 1.0}]) == (0.3, (3, 3), 0.3)
    mean, steps, last = _final_reward(history[3:])  # no finite reward logged
    assert steps is None and math.isnan(mean) and math.isnan(last)


def test_existing_run_is_not_overwritten_silently(run):
    result, _, _ = run
    with pytest.raises(FileExistsError, match="already holds a run"):
        run_training(CONFIG, result.run_dir)


def test_training_again_into_a_stopped_runs_folder_says_the_run_there_is_partial_and_not_resumed(
    tmp_path,
):
    # `train runs/x` again after a Ctrl-C at step 56 said only "already holds a run
    # (bayes_grpo_run.json, trainer_state.json); pass --overwrite", as of a finished run: not
    # that the run there had stopped, nor that --overwrite trains it again from step 0
    from bayes_grpo.train.runner import check_output_dir

    out = tmp_path / "x"
    out.mkdir()
    (out / "trainer_state.json").write_text('{"log_history": []}')
    meta = {"max_steps": 300, "completed": False, "steps_done": 56}
    (out / "bayes_grpo_run.json").write_text(json.dumps(meta))
    with pytest.raises(FileExistsError) as refused:
        check_output_dir(out, overwrite=False)
    said = str(refused.value)
    assert (
        'already holds a run (bayes_grpo_run.json, trainer_state.json), one stopped after 56 of 300 steps ("completed": false)'
        in said
    )
    assert (
        "does not resume a run: pass overwrite=True / --overwrite to train it again from step 0"
        in said
    )
    (out / "bayes_grpo_run.json").write_text(json.dumps({**meta, "completed": True}))
    with pytest.raises(FileExistsError) as refused:
        check_output_dir(out, overwrite=False)
    assert "stopped" not in str(refused.value) and "resume" not in str(refused.value)


def test_a_renamed_run_directory_is_named_by_its_folder_and_the_stored_id_is_said(run, tmp_path):
    # `mv runs/tmp runs/g8_k2_s0`: ingest named the run 'tmp', the run_id in its
    # bayes_grpo_run.json, without a word, and 'g8_k2_s0' only when another run also stored 'tmp'
    import shutil

    result, _, meta = run
    renamed = tmp_path / "g8_k2_s0"
    shutil.copytree(result.run_dir, renamed)
    assert meta["run_id"] == result.run_dir.name != renamed.name
    alone = load_runs([renamed])
    assert list(alone.run.values) == ["g8_k2_s0"]
    (said,) = [w for w in runset_warnings(alone)["g8_k2_s0"] if "names the run" in w]
    assert f"names the run {result.run_dir.name!r}" in said and "now 'g8_k2_s0'" in said
    both = load_runs([result.run_dir, renamed])
    assert sorted(both.run.values) == sorted([result.run_dir.name, "g8_k2_s0"])
    assert not any("names the run" in w for w in runset_warnings(both).get(meta["run_id"], []))


def test_another_runs_checkpoints_and_files_a_save_would_write_over_are_refused(tmp_path):
    # a folder holding only checkpoint-*/ (a run ingest reads) was trained into without
    # --overwrite, and `train DIR --save-model` wrote the model's config.json over the user's
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=1)
    other = tmp_path / "other"
    (other / "checkpoint-2").mkdir(parents=True)
    (other / "checkpoint-2" / "trainer_state.json").write_text('{"log_history": []}')
    with pytest.raises(FileExistsError, match=r"already holds a run \(checkpoint-2\)"):
        run_training(cfg, other)
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("config.json", "README.md", "notes.txt"):
        (mine / name).write_text("keep me")
    with pytest.raises(FileExistsError, match=r"holds config\.json, which saving the model"):
        run_training(dataclasses.replace(cfg, save_model=True), mine)
    ckpt = dataclasses.replace(cfg, extra_grpo_args={"save_strategy": "steps", "save_steps": 1})
    with pytest.raises(FileExistsError, match=r"holds README\.md, which TRL's checkpoints"):
        run_training(ckpt, mine)
    assert sorted(p.name for p in mine.iterdir()) == ["README.md", "config.json", "notes.txt"]
    assert all((mine / n).read_text() == "keep me" for n in ("config.json", "README.md"))


def test_overwrite_replaces_a_runs_files_but_not_a_users_readme_or_config_the_run_would_write_over(
    tmp_path,
):
    # --overwrite skipped the clash check: TRL's model card replaced a user's README.md, and
    # --save-model a user's config.json, that the replaced run (no checkpoints, no saved model)
    # had not written; the help said "other files stay"
    from bayes_grpo.train.runner import check_output_dir

    out = tmp_path / "run"
    out.mkdir()
    (out / "trainer_state.json").write_text('{"log_history": []}')
    plain = TrainConfig(group_size=2, prompts_per_step=1, max_steps=1)
    (out / "bayes_grpo_run.json").write_text(json.dumps({"config": plain.to_dict()}))
    for name in ("README.md", "config.json"):
        (out / name).write_text("the user's")
    ckpt = dataclasses.replace(plain, extra_grpo_args={"save_strategy": "steps", "save_steps": 1})
    with pytest.raises(FileExistsError, match=r"holds README\.md, which TRL's checkpoints would write over, and the run there did not write it"):
        check_output_dir(out, overwrite=True, config=ckpt)
    with pytest.raises(FileExistsError, match=r"holds config\.json, which saving the model .* the run there did not write it"):
        check_output_dir(out, overwrite=True, config=dataclasses.replace(plain, save_model=True))
    check_output_dir(out, overwrite=True, config=plain)  # writes neither: replaced as before
    # files the replaced run wrote (its model card, its saved model) are replaced with it
    (out / "bayes_grpo_run.json").write_text(json.dumps({"config": dataclasses.replace(ckpt, save_model=True).to_dict()}))
    check_output_dir(out, overwrite=True, config=dataclasses.replace(ckpt, save_model=True))
    # a TRL run with no bayes_grpo_run.json (or one with no config): its card is the one beside
    # its checkpoints
    (out / "bayes_grpo_run.json").write_text("{}")
    with pytest.raises(FileExistsError, match=r"holds README\.md"):
        check_output_dir(out, overwrite=True, config=ckpt)
    (out / "bayes_grpo_run.json").unlink()
    with pytest.raises(FileExistsError, match=r"holds README\.md"):
        check_output_dir(out, overwrite=True, config=ckpt)
    (out / "checkpoint-1").mkdir()
    (out / "checkpoint-1" / "trainer_state.json").write_text('{"log_history": []}')
    check_output_dir(out, overwrite=True, config=ckpt)
    # --overwrite into a folder of no run: every such file is the user's
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("the user's")
    with pytest.raises(FileExistsError, match=r"no run there wrote it: overwrite=True / --overwrite replaces a run, not other files; move it out or"):
        check_output_dir(mine, overwrite=True, config=ckpt)
    assert (mine / "README.md").read_text() == (out / "config.json").read_text() == "the user's"


def test_overwrite_refuses_a_readme_or_model_file_that_is_a_link_even_where_the_run_there_wrote_one(tmp_path):
    # a run that saved checkpoints (and its model) wrote README.md and config.json; the user put
    # a link to their own file in its place: --overwrite took it for the run's, and TRL's model
    # card (save_pretrained's config) was written through the link over the user's file outside
    from bayes_grpo.train.runner import check_output_dir

    ckpt = TrainConfig(
        group_size=2, prompts_per_step=1, max_steps=1, save_model=True,
        extra_grpo_args={"save_strategy": "steps", "save_steps": 1},
    )
    out = tmp_path / "run"
    out.mkdir()
    (out / "trainer_state.json").write_text('{"log_history": []}')
    (out / "bayes_grpo_run.json").write_text(json.dumps({"config": ckpt.to_dict()}))
    for name in ("README.md", "config.json"):
        (out / name).write_text("the run's")
    check_output_dir(out, overwrite=True, config=ckpt)  # the run's own: replaced
    for name in ("README.md", "config.json"):
        (tmp_path / f"my_{name}").write_text("the user's")
        (out / name).unlink()
        (out / name).symlink_to(tmp_path / f"my_{name}")
        with pytest.raises(FileExistsError, match=rf"holds {re.escape(name)}, which .* the run there did not write it"):
            check_output_dir(out, overwrite=True, config=ckpt)
        (out / name).unlink()
        (out / name).write_text("the run's")


def test_overwrite_replaces_the_old_runs_checkpoints_and_saved_model_too(tmp_path):
    # `train DIR -G 2 --overwrite` over a G=4 run saved with checkpoints and --save-model left
    # checkpoint-12/ and the G=4 weights beside the new G=2 metadata: ingest said "give
    # checkpoint-12/trainer_state.json to read" its steps, which then came labelled G=2
    out = tmp_path / "run"
    (out / "checkpoint-12").mkdir(parents=True)
    (out / "checkpoint-12" / "trainer_state.json").write_text('{"log_history": []}')
    for name in ("trainer_state.json", "config.json", "model.safetensors"):
        (out / name).write_text("{}")
    (out / "bayes_grpo_run.json").write_text('{"config": {"save_model": true}}')
    (out / "notes.txt").write_text("keep me")
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=2)
    run_training(cfg, out, overwrite=True, threads=1)
    assert sorted(p.name for p in out.iterdir()) == [
        "bayes_grpo_run.json",
        "notes.txt",
        "trainer_state.json",
    ]
    assert read_run_dir(out)[1]["group_size"] == 2 and (out / "notes.txt").read_text() == "keep me"
    # files of a model's names that no replaced run saved are the user's: they stay
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("keep me")
    run_training(cfg, mine, overwrite=True, threads=1)
    run_training(cfg, mine, overwrite=True, threads=1)
    assert (mine / "config.json").read_text() == "keep me"


def test_overwrite_removes_the_replaced_runs_model_card_but_never_a_readme_it_cannot_prove_is_that(
    tmp_path,
):
    # `train DIR --overwrite` without checkpoints over a run that saved some removed its
    # checkpoints but kept TRL's model card README.md, which then described the replaced run
    import os

    ckpt = TrainConfig(
        group_size=2, prompts_per_step=1, max_steps=2,
        extra_grpo_args={"save_strategy": "steps", "save_steps": 1},
    )
    plain = dataclasses.replace(ckpt, extra_grpo_args={})
    out = tmp_path / "run"
    run_training(ckpt, out, threads=1)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "# Model Card for run" in card
    run_training(ckpt, out, overwrite=True, threads=1)  # a run saving checkpoints writes its own
    assert (out / "README.md").read_text() == card
    run_training(plain, out, overwrite=True, threads=1)
    assert sorted(p.name for p in out.iterdir()) == ["bayes_grpo_run.json", "trainer_state.json"]
    # what is not surely the replaced run's card stays: a card edited since the run, a user's
    # README.md (even one dated before the run), a link to a card
    (tmp_path / "card.md").write_text(card)
    readmes = {
        "edited": card + "\nNotes: learning rate too high.\n",
        "users": "# My experiments\n",
        "link": None,
    }
    for name, text in readmes.items():
        folder = tmp_path / name
        (folder / "checkpoint-1").mkdir(parents=True)
        (folder / "checkpoint-1" / "trainer_state.json").write_text('{"log_history": []}')
        (folder / "trainer_state.json").write_text('{"log_history": []}')
        (folder / "bayes_grpo_run.json").write_text(json.dumps({"config": ckpt.to_dict()}))
        if text is None:
            (folder / "README.md").symlink_to(tmp_path / "card.md")
        else:
            (folder / "README.md").write_text(text)
        logged = (folder / "bayes_grpo_run.json").stat().st_mtime
        when = logged + 60 if name == "edited" else logged - 60
        os.utime(folder / "README.md", (when, when), follow_symlinks=False)
        run_training(plain, folder, overwrite=True, threads=1)
        assert sorted(p.name for p in folder.iterdir()) == [
            "README.md", "bayes_grpo_run.json", "trainer_state.json"
        ], name
        assert (folder / "README.md").read_text() == (text or card), name
    assert (tmp_path / "card.md").read_text() == card


def _parity_reward_interrupted_at_call(n: int):
    """A reward function (1 for a completion of odd length) that raises KeyboardInterrupt, as a
    Ctrl-C would, at its ``n``-th call."""
    calls = []

    def reward_then_interrupt(prompts, completions, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise KeyboardInterrupt
        return [float(len(c) % 2) for c in completions]

    return reward_then_interrupt


def test_a_replacing_run_stopped_before_it_completes_leaves_the_old_runs_checkpoints_as_they_were(
    tmp_path,
):
    # `train DIR --overwrite --grpo-arg save_strategy=steps` over a checkpointed run, stopped at
    # step 3: TRL had written its checkpoint-2 over the old run's and removed the old run's others
    # by its save_total_limit, and the note said the old run was "left as it was"
    from bayes_grpo.train.runner import REPLACED_CHECKPOINTS

    def states(out):
        return {p.name: (p / "trainer_state.json").read_text() for p in out.glob("checkpoint-*")}

    saves = {"save_strategy": "steps", "save_steps": 2}
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=4, extra_grpo_args=saves)
    out = tmp_path / "run"
    run_training(cfg, out, threads=1)
    old, old_meta = states(out), (out / "bayes_grpo_run.json").read_text()
    assert sorted(old) == ["checkpoint-2", "checkpoint-4"]
    reward_then_interrupt = _parity_reward_interrupted_at_call(4)

    new = dataclasses.replace(
        cfg, seed=1, max_steps=6, extra_grpo_args={**saves, "save_total_limit": 1}
    )
    with pytest.raises(KeyboardInterrupt) as stop:
        run_training(new, out, reward_funcs=[reward_then_interrupt], overwrite=True, threads=1)
    assert states(out) == old and (out / "bayes_grpo_run.json").read_text() == old_meta
    assert not (out / REPLACED_CHECKPOINTS).exists()
    (note,) = stop.value.__notes__
    assert "left as it was (this run's log and checkpoints are not kept)" in note
    # completed, it replaces them: only its own checkpoints are left
    run_training(dataclasses.replace(new, max_steps=4), out, overwrite=True, threads=1)
    assert sorted(states(out)) == ["checkpoint-4"]
    assert states(out)["checkpoint-4"] != old["checkpoint-4"]
    assert not (out / REPLACED_CHECKPOINTS).exists()
    # a replacing run killed outright leaves them held: a new run says where, and buries nothing
    (out / REPLACED_CHECKPOINTS / "checkpoint-2").mkdir(parents=True)
    with pytest.raises(FileExistsError, match=rf"holds {REPLACED_CHECKPOINTS}/, the checkpoints"):
        run_training(cfg, out, overwrite=True, threads=1)


def test_only_a_checkpoint_trl_wrote_counts_as_a_run_and_a_users_checkpoint_named_entries_stay(
    tmp_path,
):
    # every checkpoint-* folder was taken for a run's checkpoint: a user's checkpoint-notes/ made
    # the folder "already hold a run", and a replacing run (--overwrite) removed it on completing
    from bayes_grpo.train.runner import check_output_dir

    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=2)
    mine = tmp_path / "mine"
    (mine / "checkpoint-notes").mkdir(parents=True)
    (mine / "checkpoint-notes" / "todo.txt").write_text("keep me")
    (mine / "checkpoint-1").write_text("a file, not a checkpoint")
    (mine / "checkpoint-7").mkdir()  # no trainer_state.json: nothing TRL wrote complete
    check_output_dir(mine, overwrite=False, config=cfg)  # holds no run
    out = tmp_path / "run"
    run_training(cfg, out, threads=1)
    for name in ("checkpoint-notes", "checkpoint-7"):
        (out / name).mkdir()
    (out / "checkpoint-notes" / "todo.txt").write_text("keep me")
    (out / "checkpoint-1").write_text("keep me")
    (out / "checkpoint-12").mkdir()  # the replaced run's checkpoint: it goes
    (out / "checkpoint-12" / "trainer_state.json").write_text('{"log_history": []}')
    run_training(dataclasses.replace(cfg, seed=1), out, overwrite=True, threads=1)
    assert sorted(p.name for p in out.iterdir()) == [
        "bayes_grpo_run.json",
        "checkpoint-1",
        "checkpoint-7",
        "checkpoint-notes",
        "trainer_state.json",
    ]
    assert (out / "checkpoint-notes" / "todo.txt").read_text() == "keep me"
    assert read_run_dir(out)[1]["seed"] == 1
    # a run that saves checkpoints writes checkpoint-<step> (and removes older ones by
    # save_total_limit): an entry of such a name that is no checkpoint is refused, named
    ckpt = dataclasses.replace(cfg, extra_grpo_args={"save_strategy": "steps", "save_steps": 1})
    for overwrite in (False, True):
        with pytest.raises(
            FileExistsError,
            match=r"holds checkpoint-1, checkpoint-7, which TRL's checkpoints would write .*no "
            r"trainer_state\.json",
        ):
            check_output_dir(mine, overwrite=overwrite, config=ckpt)
    (mine / "checkpoint-1").unlink()
    (mine / "checkpoint-7").rmdir()
    run_training(ckpt, mine, threads=1)
    assert (mine / "checkpoint-notes" / "todo.txt").read_text() == "keep me"
    # a replacing run that saves checkpoints, stopped, puts back the old run's and removes only
    # its own: the user's folder stays
    reward_then_interrupt = _parity_reward_interrupted_at_call(2)
    with pytest.raises(KeyboardInterrupt):
        run_training(
            dataclasses.replace(ckpt, seed=1),
            mine,
            reward_funcs=[reward_then_interrupt],
            overwrite=True,
            threads=1,
        )
    assert (mine / "checkpoint-notes" / "todo.txt").read_text() == "keep me"
    assert sorted(p.name for p in mine.glob("checkpoint-*")) == [
        "checkpoint-1",
        "checkpoint-2",
        "checkpoint-notes",
    ]
    run_training(dataclasses.replace(ckpt, seed=1), mine, overwrite=True, threads=1)
    assert (mine / "checkpoint-notes" / "todo.txt").read_text() == "keep me"


def test_a_replacing_run_stopped_while_saving_its_model_leaves_its_own_settings_beside_its_log(
    tmp_path, monkeypatch
):
    # `train DIR -G 2 --overwrite --save-model` over a G=4 run, stopped (SIGTERM) while saving
    # the weights after its last step: its log had replaced the old run's trainer_state.json,
    # but the old run's bayes_grpo_run.json (G=4, completed) and checkpoints stayed beside it,
    # so ingest read the new run's steps as the G=4 run's
    import trl

    out = tmp_path / "run"
    (out / "checkpoint-12").mkdir(parents=True)
    (out / "checkpoint-12" / "trainer_state.json").write_text('{"log_history": []}')
    (out / "trainer_state.json").write_text('{"log_history": []}')
    old = {"group_size": 4, "completed": True, "config": {"save_model": True}}
    (out / "bayes_grpo_run.json").write_text(json.dumps(old))

    def stopped(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(trl.GRPOTrainer, "save_model", stopped)
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=2, save_model=True)
    with pytest.raises(KeyboardInterrupt) as stop:
        run_training(cfg, out, overwrite=True, threads=1)
    frame, meta = read_run_dir(out)
    assert len(frame) == 2 and meta["group_size"] == 2
    assert meta["completed"] is False and meta["steps_done"] == 2
    assert not (out / "checkpoint-12").exists()
    (note,) = stop.value.__notes__
    assert "stopped after 2 of 2 steps; kept the steps logged" in note
    assert "the model it was saving may be incomplete" in note


def test_a_file_given_as_the_run_directory_is_a_clear_error_and_is_left_alone(tmp_path, capsys):
    # `bayes-grpo train notes.txt` failed with the bare "[Errno 17] File exists: 'notes.txt'"
    from bayes_grpo.cli import main as cli_main

    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    assert cli_main(["train", str(path), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a run directory" in err and len(err.strip().splitlines()) == 1
    assert path.read_text() == "keep me"


def test_a_run_directory_under_a_file_is_one_error_line_and_the_dry_run_says_so(tmp_path, capsys):
    # `bayes-grpo train notes.txt/run` ended in a NotADirectoryError traceback (and --dry-run
    # planned the run without a word)
    from bayes_grpo.cli import main as cli_main

    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    assert cli_main(["train", str(path / "run"), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "notes.txt is a file, not a folder" in err and len(err.strip().splitlines()) == 1
    assert cli_main(["train", str(path / "run"), "--dry-run", "--json"]) == 0
    assert "is a file" in json.loads(capsys.readouterr().out)["run_dir_problem"]
    assert path.read_text() == "keep me"


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_a_thread_count_below_one_is_one_error_line_before_anything_is_made(
    tmp_path, capsys, threads
):
    # `train DIR --threads 0` ended in torch's RuntimeError traceback "set_num_threads expects
    # a positive integer", after the model had been built
    from bayes_grpo.cli import main as cli_main

    run_dir = tmp_path / "run"
    assert cli_main(["train", str(run_dir), "--steps", "1", "--threads", threads]) == 2
    err = capsys.readouterr().err
    assert f"threads (--threads) must be an integer >= 1, got {threads}" in err
    assert len(err.strip().splitlines()) == 1 and not run_dir.exists()
    # the dry run, which checks the settings the run refuses, passed it
    assert cli_main(["train", str(run_dir), "--threads", threads, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"threads (--threads) must be an integer >= 1, got {threads}" in err


def test_a_run_failing_on_its_configuration_leaves_no_run_directory_behind(tmp_path, capsys):
    # the folders were made before the model path was found missing and stayed behind, empty
    from bayes_grpo.cli import main as cli_main

    run_dir = tmp_path / "new" / "parent" / "run"
    missing_model = str(tmp_path / "no_such_model")
    assert cli_main(["train", str(run_dir), "--model", missing_model, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "model directory not found" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_run_failing_in_training_removes_only_the_folders_it_made(tmp_path):
    def broken_reward(prompts, completions, **kwargs):
        raise ValueError("reward server down")

    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=1, seed=0)
    made = tmp_path / "made" / "run"
    with pytest.raises(ValueError, match="reward server down"):
        run_training(cfg, made, reward_funcs=[broken_reward], threads=1)
    assert not (tmp_path / "made").exists()
    # a folder the user had (with a file of theirs) is left as it was
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="reward server down"):
        run_training(cfg, given, reward_funcs=[broken_reward], threads=1)
    assert sorted(p.name for p in given.iterdir()) == ["notes.txt"]
    assert (given / "notes.txt").read_text() == "keep me"


def test_a_failed_run_keeps_the_logs_and_checkpoints_it_wrote(tmp_path):
    # an interrupted long training must not lose its checkpoints: only empty folders are removed
    from bayes_grpo.train.runner import _prepare_output_dir, _remove_created

    run_dir = tmp_path / "new" / "run"
    created = _prepare_output_dir(run_dir, overwrite=False)
    assert created == [tmp_path / "new", run_dir]
    (run_dir / "checkpoint-500").mkdir()
    (run_dir / "checkpoint-500" / "trainer_state.json").write_text("{}")
    _remove_created(created)
    assert (run_dir / "checkpoint-500" / "trainer_state.json").read_text() == "{}"
    empty = tmp_path / "other" / "run"
    _remove_created(_prepare_output_dir(empty, overwrite=False))
    assert not (tmp_path / "other").exists()


def test_example_data_plan_has_the_comparisons_the_issue_asks_for(load_script):
    runs, groups = load_script("scripts/make_example_data.py").plan()
    fixed_c = [runs[r] for r in groups["g_fixed_completions"]]
    fixed_p = [runs[r] for r in groups["g_fixed_prompts"]]
    assert {(c["group_size"], c["prompts_per_step"]) for c in fixed_c} == {(4, 32), (16, 8)}
    assert {(c["group_size"], c["prompts_per_step"]) for c in fixed_p} == {(4, 8), (16, 8)}
    for members in (fixed_c, fixed_p):
        for g in (4, 16):
            assert sorted(c["seed"] for c in members if c["group_size"] == g) == [0, 1, 2]
    assert sorted(runs[r].get("k_ref", 1) for r in groups["k_ref_ladder"]) == [1, 2, 4, 8]
    assert len({runs[r]["learning_rate"] for r in groups["lr_ladder"]}) >= 3
    assert [runs[r]["optimizer"] for r in groups["sgd_momentum"]] == ["sgd"]


def test_shipped_example_run_regenerates_from_its_seed(tmp_path):
    # The first steps of a shipped run are reproduced exactly by a short run with the same seed
    # and the same prompt set (the shipped runs' was max_steps x prompts + one rollout, the default
    # then, recorded as null; scripts/make_example_data.py pins it, and so does this test).
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "data" / "tiny" / "g16_p8_lr0.001_k1_adamw_s0"
    if not (shipped / "trainer_state.json").is_file():
        pytest.skip("example data not generated")
    frame, meta = read_run_dir(shipped)
    n_steps = 12
    cfg = TrainConfig(**{**meta["config"], "max_steps": n_steps, "extra_grpo_args": {}})
    cfg.n_prompts = (
        meta["config"]["max_steps"] * cfg.prompts_per_step + cfg.prompts_per_step * cfg.k_ref
    )
    run_training(cfg, tmp_path / "again", threads=1)
    again, _ = read_run_dir(tmp_path / "again")
    for col in ("loss", "entropy", "grad_norm", "num_tokens", "reward", "completions/mean_length"):
        np.testing.assert_allclose(
            again[col].to_numpy(), frame[col].iloc[:n_steps].to_numpy(), rtol=1e-6, err_msg=col
        )


def test_cli_train_warns_when_the_reward_was_the_same_at_every_logged_step(tmp_path, capsys):
    # `bayes-grpo train runs/g8 -G 8 --prompts-per-step 4 --lr 1e-2 --steps 60` logged reward 0 at
    # all 60 steps (no group with reward spread: no GRPO signal) and said only "final reward 0.000"
    import pandas as pd

    from bayes_grpo.cli import main as cli_main
    from bayes_grpo.cli.train import constant_reward_warning

    meta = {"group_size": 8}
    flat = pd.DataFrame({"reward": [0.0, 0.0, np.nan, 0.0]})
    note = constant_reward_warning(flat, meta)
    assert "reward was 0 at every one of the 3 logged steps" in note and "group of 8 completions" in note
    assert constant_reward_warning(pd.DataFrame({"reward": [0.0, 0.125, 0.0]}), meta) is None
    assert constant_reward_warning(pd.DataFrame({"reward": [0.5]}), meta) is None
    out = tmp_path / "flat"
    argv = ["train", str(out), "-G", "2", "--prompts-per-step", "2", "--steps", "2", "--lr", "0.01"]
    assert cli_main([*argv, "--threads", "1", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    frame, _ = read_run_dir(out)
    said = constant_reward_warning(frame, report["metadata"])
    assert said and "reward was 0 at every one of the 2 logged steps" in said  # seed 0: no spread
    assert report["warnings"] == [said]
    assert f"bayes-grpo train: warning: {out}: {said}" in captured.err


def test_cli_trains_and_reports_the_run_as_json(tmp_path, capsys):
    from bayes_grpo.cli import main as cli_main

    out = tmp_path / "cli_run"
    argv = [
        "train",
        str(out),
        "-G",
        "4",
        "--prompts-per-step",
        "2",
        "--steps",
        "3",
        "--optimizer",
        "sgd",
    ]
    assert cli_main([*argv, "--momentum", "0.5", "--lr", "0.01", "--threads", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (
        report["run_dir"] == str(out) and report["metadata"]["momentum_convention"] == "heavy_ball"
    )
    frame, meta = read_run_dir(out)
    assert len(frame) == 3 and meta["optimizer"] == "sgd" and meta["momentum"] == 0.5
    assert report["final_reward_steps"] == [3, 3]
    assert report["last_reward"] == report["final_reward"] == frame["reward"].iloc[-1]


def test_the_cli_shows_no_progress_bars_of_the_dataset_it_loads(tmp_path, capsys):
    # `train --task gsm8k --dataset gsm.jsonl` printed datasets' "Generating train split" and
    # "Map" progress bars (and, for a malformed file, its logged error) on stderr, which only
    # --verbose-libs keeps
    from bayes_grpo.cli import main as cli_main
    from bayes_grpo.train.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "mini-lm", seed=1, n_positions=64)
    data = tmp_path / "gsm.jsonl"
    rows = [{"question": f"next {d} =", "answer": f"#### {d + 1}"} for d in (1, 5)]
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    capsys.readouterr()  # transformers' progress bar of the model's save
    argv = ["train", str(tmp_path / "run"), "--model", str(model_dir), "--task", "gsm8k"]
    argv += ["--dataset", str(data), "-G", "2", "--prompts-per-step", "2", "--steps", "1"]
    assert cli_main([*argv, "--max-completion-length", "3", "--threads", "1", "--json"]) == 0
    err = capsys.readouterr().err
    assert "Generating train split" not in err and "Map" not in err, err


def test_local_model_directory_and_gsm8k_style_dataset_path(tmp_path):
    # the real-model code path (model by path, GSM8K-style prompts, numeric answer checker),
    # exercised offline with the tiny model saved to disk and a two-question local dataset
    from bayes_grpo.train.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "mini-lm", seed=1, n_positions=64)
    data = tmp_path / "gsm.jsonl"
    rows = [
        {"question": "next 1 =", "answer": "#### 2"},
        {"question": "next 5 =", "answer": "#### 6"},
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    cfg = TrainConfig(
        model=str(model_dir),
        task="gsm8k",
        dataset=str(data),
        group_size=2,
        prompts_per_step=2,
        max_steps=2,
        max_completion_length=3,
        seed=1,
    )
    short_context = build_tiny_model(tmp_path / "short", n_positions=16)
    # the error named neither the model nor the option to change
    match = (
        re.escape(f"{short_context}: ")
        + r"prompts of up to \d+ tokens plus max_completion_length=\d+ "
    )
    match += r"\(--max-completion-length\) exceed the model's context of 16 positions"
    with pytest.raises(ValueError, match=match):
        run_training(TrainConfig(**{**cfg.to_dict(), "model": str(short_context)}), tmp_path / "x")
    assert not (tmp_path / "x").exists()
    result = run_training(cfg, tmp_path / "gsm_run", threads=1)
    frame, meta = read_run_dir(result.run_dir)
    assert (
        meta["model"] == "mini-lm"
        and meta["task"] == "gsm8k"
        and meta["reward_funcs"] == ["gsm8k_reward"]
    )
    assert (
        meta["model_size"]
        == json.loads((model_dir / "bayes_grpo_tiny.json").read_text())["n_params"]
    )
    assert len(frame) == 2 and frame["reward"].between(0, 1).all()

    calls = []

    def always_one(prompts, completions, **kwargs):
        calls.append(len(completions))
        return [1.0] * len(completions)

    custom = TrainConfig(**{**cfg.to_dict(), "task": "custom", "max_steps": 1})
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"prompt": f"next {d} ="}) for d in range(4)), encoding="utf-8"
    )
    custom.dataset = str(prompts)
    run_training(custom, tmp_path / "custom_run", reward_funcs=[always_one], threads=1)
    frame, _ = read_run_dir(tmp_path / "custom_run")
    assert calls == [4] and frame["reward"].tolist() == [1.0]


@pytest.mark.parametrize("via", ["num_iterations", "steps_per_generation"])
def test_policy_lag_with_gradient_accumulation_follows_the_k_ref_mapping(tmp_path, via):
    cfg = TrainConfig(
        group_size=4,
        prompts_per_step=2,
        k_ref=3,
        k_ref_via=via,
        gradient_accumulation_steps=2,
        max_steps=6,
        learning_rate=1e-2,
    )
    run_training(cfg, tmp_path / via, threads=1)
    frame, meta = read_run_dir(tmp_path / via)
    np.testing.assert_array_equal(frame["dynamics/policy_lag"], [0, 1, 2, 0, 1, 2])
    assert frame["reward"].notna().sum() == 2  # one rollout per K_ref optimizer steps
    fresh = frame[frame["dynamics/policy_lag"] == 0]
    np.testing.assert_allclose(fresh["dynamics/is_ratio_mean"], 1.0, atol=1e-6)
    assert meta["k_ref_mapping"]["gradient_accumulation_steps"] == 2


def test_an_interrupted_run_leaves_its_settings_beside_the_checkpoints_it_kept(tmp_path):
    # the metadata was written only after a completed training: the checkpoints of an
    # interrupted run were kept but ingested with G, lr, momentum, k_ref and seed unknown
    calls = []

    def reward_then_interrupt(prompts, completions, **kwargs):
        calls.append(1)
        if len(calls) > 4:
            raise KeyboardInterrupt
        return [0.0] * len(prompts)

    cfg = TrainConfig(
        group_size=4,
        prompts_per_step=2,
        learning_rate=2e-3,
        momentum=0.5,
        k_ref=2,
        max_steps=20,
        seed=3,
        extra_grpo_args={"save_strategy": "steps", "save_steps": 2},
    )
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_training(cfg, out, reward_funcs=[reward_then_interrupt], threads=1)
    meta = json.loads((out / "bayes_grpo_run.json").read_text())
    assert meta["completed"] is False and "wall_time_s" not in meta
    with pytest.raises(
        FileExistsError,
        match=r"already holds a run \(bayes_grpo_run.json, trainer_state.json, 4 checkpoint-\* folders\)",
    ):
        run_training(cfg, out, reward_funcs=[reward_then_interrupt], threads=1)
    ds = load_runs([out], min_points=2)
    assert ds.sizes["run"] == 1
    got = {c: ds[c].values[0].item() for c in ("group_size", "learning_rate", "momentum", "k_ref")}
    assert got == {"group_size": 4, "learning_rate": 2e-3, "momentum": 0.5, "k_ref": 2}
    assert str(ds["model"].values[0]) == "tiny-gpt2" and ds["seed"].values[0] == 3
    # a run replaced with overwrite=True that is interrupted in turn leaves the run it was to
    # replace as it was: its log and its metadata, not that log with the new settings
    calls.clear()
    again = TrainConfig(**{**cfg.to_dict(), "group_size": 2, "prompts_per_step": 4})
    again.extra_grpo_args = {"save_strategy": "steps", "save_steps": 3}  # new checkpoint names
    with pytest.raises(KeyboardInterrupt):
        run_training(again, out, reward_funcs=[reward_then_interrupt], overwrite=True, threads=1)
    assert json.loads((out / "bayes_grpo_run.json").read_text()) == meta
    # a folder of the user's where the training failed before writing anything gets no metadata
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("keep me")
    calls.clear()
    calls.extend([1] * 4)
    with pytest.raises(KeyboardInterrupt):
        run_training(cfg, given, reward_funcs=[reward_then_interrupt], threads=1)
    assert sorted(p.name for p in given.iterdir()) == ["notes.txt"]


def test_an_interrupted_run_without_checkpoints_keeps_the_steps_it_logged(tmp_path):
    # `train runs/x --steps 12` interrupted in its 8th step left nothing at all: TRL writes
    # trainer_state.json only at the end, so the 7 logged steps were lost with the folder
    reward_then_interrupt = _parity_reward_interrupted_at_call(8)

    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=12, seed=1)
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_training(cfg, out, reward_funcs=[reward_then_interrupt], threads=1)
    frame, meta = read_run_dir(out)
    assert meta["completed"] is False and meta["steps_done"] == 7
    assert list(frame.index) == list(range(1, 8)) and frame["reward"].notna().all()
    ds = load_runs([out], min_points=2)
    assert np.isfinite(ds["reward"].values[0]).sum() == 7 and float(ds["group_size"][0]) == 2
    # ingest says the run is partial (it listed it as any other run, with no word)
    (warned,) = runset_warnings(ds).values()
    assert any("did not complete (failed or interrupted after 7 of 12 steps)" in w for w in warned)


def _train_stopped_by_sigterm(tmp_path, monkeypatch, module, at_call, steps):
    """``bayes-grpo train`` of a tiny run whose reward function sends the process SIGTERM at its
    ``at_call``-th call; returns the ``SystemExit``, the run directory and the argv (without the
    reward). The handler the CLI replaces stands in for the default action, which ends pytest too."""
    import signal
    import sys

    from bayes_grpo.cli import main as cli_main

    (tmp_path / f"{module}.py").write_text(
        "import os, signal\n"
        "calls = []\n"
        "def reward(prompts, completions, **kw):\n"
        "    calls.append(1)\n"
        f"    if len(calls) == {at_call}:\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return [float(len(c) % 2) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)

    def not_handled(signum, frame):
        raise RuntimeError("SIGTERM reached the default action")

    out = tmp_path / "run"
    argv = ["train", str(out), "-G", "2", "--prompts-per-step", "2", "--steps", str(steps)]
    previous = signal.signal(signal.SIGTERM, not_handled)
    try:
        with pytest.raises(SystemExit) as stop:
            cli_main([*argv, "--threads", "1", "--reward", f"{module}:reward"])
        assert signal.getsignal(signal.SIGTERM) is not_handled  # the CLI put it back
    finally:
        signal.signal(signal.SIGTERM, previous)
    return stop.value, out, argv


def test_a_terminated_cli_run_keeps_the_steps_it_logged(tmp_path, monkeypatch):
    # `timeout 12 bayes-grpo train runs/x --steps 2000` (SIGTERM, as a scheduler's preemption)
    # left runs/x empty: the default SIGTERM action ends Python without unwinding
    import signal

    stop, out, _ = _train_stopped_by_sigterm(tmp_path, monkeypatch, "bg_qa_term", 4, 12)
    assert stop.code == 128 + signal.SIGTERM
    frame, meta = read_run_dir(out)
    assert meta["completed"] is False and meta["steps_done"] == 3 and len(frame) == 3


def test_a_terminated_cli_run_says_it_was_stopped_and_what_it_kept(tmp_path, monkeypatch, capsys):
    # `timeout 20 bayes-grpo train runs/x --steps 5000` exited 143 without a word: nothing said
    # the run had stopped, after how many steps, or that its partial log was kept
    import signal
    import sys

    from bayes_grpo.cli import main as cli_main

    stop, out, argv = _train_stopped_by_sigterm(tmp_path, monkeypatch, "bg_qa_stop", 3, 9)
    assert stop.code == 128 + signal.SIGTERM
    (said,) = capsys.readouterr().err.strip().splitlines()
    assert said == (
        f"bayes-grpo train: stopped by SIGTERM: {out}: stopped after 2 of 9 steps; kept the steps "
        'logged (trainer_state.json) and the run\'s settings (bayes_grpo_run.json, "completed": '
        "false): `bayes-grpo ingest` reads it as a partial run"
    )
    ds = load_runs([out], min_points=2)
    assert np.isfinite(ds["reward"].values[0]).sum() == 2 and float(ds["group_size"][0]) == 2
    # an error in the training says the same after its own line (a Python caller: in the
    # exception's notes)
    (tmp_path / "bg_qa_fail.py").write_text(
        "calls = []\n"
        "def reward(prompts, completions, **kw):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 3:\n"
        "        raise ValueError('the verifier is down')\n"
        "    return [float(len(c) % 2) for c in completions]\n"
    )
    monkeypatch.delitem(sys.modules, "bg_qa_fail", raising=False)
    failed = tmp_path / "failed"
    argv[1] = str(failed)
    assert cli_main([*argv, "--threads", "1", "--reward", "bg_qa_fail:reward"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("bayes-grpo train: error:") and "the verifier is down" in err[0]
    assert err[1].startswith(f"bayes-grpo train: {failed}: stopped after 2 of 9 steps; kept")


def test_a_cli_run_stopped_by_ctrl_c_says_what_it_kept_without_a_traceback(
    tmp_path, monkeypatch, capsys
):
    # Ctrl-C in `bayes-grpo train runs/x --steps 2000` printed a 35-line KeyboardInterrupt
    # traceback through transformers and TRL, what the run kept only in its last line; SIGTERM
    # was one line "stopped by SIGTERM: ..." and exit status 143
    import sys

    from bayes_grpo.cli import main as cli_main

    (tmp_path / "bg_qa_ctrl_c.py").write_text(
        "calls = []\n"
        "def reward(prompts, completions, **kw):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 3:\n"
        "        raise KeyboardInterrupt\n"
        "    return [float(len(c) % 2) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bg_qa_ctrl_c", raising=False)
    out = tmp_path / "run"
    argv = ["train", str(out), "-G", "2", "--prompts-per-step", "2", "--steps", "9"]
    with pytest.raises(SystemExit) as stop:
        cli_main([*argv, "--threads", "1", "--reward", "bg_qa_ctrl_c:reward"])
    assert stop.value.code == 130  # 128 + SIGINT, as a shell reports a Ctrl-C
    (said,) = capsys.readouterr().err.strip().splitlines()
    assert said == (
        f"bayes-grpo train: stopped by SIGINT (Ctrl-C): {out}: stopped after 2 of 9 steps; kept "
        "the steps logged (trainer_state.json) and the run's settings (bayes_grpo_run.json, "
        '"completed": false): `bayes-grpo ingest` reads it as a partial run'
    )
    frame, meta = read_run_dir(out)
    assert meta["completed"] is False and meta["steps_done"] == 2 and len(frame) == 2


@pytest.mark.parametrize(
    ("env", "value"), [("ACCELERATE_USE_CPU", "maybe"), ("ACCELERATE_MIXED_PRECISION", "xyz")]
)
def test_a_bad_accelerate_variable_is_named_in_the_error(env, value, tmp_path, monkeypatch, capsys):
    # ACCELERATE_USE_CPU=maybe was "TRL rejected the configuration for RUN: invalid truth value
    # 'maybe'", ACCELERATE_MIXED_PRECISION=xyz "Unknown mixed_precision mode: xyz ...": the value
    # accelerate read from the environment, but not the variable
    from bayes_grpo.cli import main as cli_main

    monkeypatch.setenv(env, value)
    out = tmp_path / "run"
    argv = ["train", str(out), "-G", "2", "--prompts-per-step", "2", "--steps", "1"]
    assert cli_main([*argv, "--device", "auto", "--threads", "1"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.endswith(f"(from the environment: {env}={value!r})") and not out.exists()


def test_a_model_directory_and_a_dataset_file_given_under_the_home_folder(tmp_path, monkeypatch):
    # "~/models/mini-lm" (Python, or a quoted command line) was "model directory not found",
    # and "~/gsm.jsonl" "dataset file not found", though both existed: "~" was not expanded
    from bayes_grpo.train.runner import _load_model
    from bayes_grpo.train.tasks import load_prompt_dataset
    from bayes_grpo.train.tiny import build_tiny_model

    monkeypatch.setenv("HOME", str(tmp_path))
    build_tiny_model(tmp_path / "models" / "mini-lm")
    model, _, label = _load_model(TrainConfig(model="~/models/mini-lm"), tmp_path)
    assert label == "mini-lm" and sum(p.numel() for p in model.parameters()) > 0
    # a snapshot of the Hugging Face cache (offline runs pass its path): its model coordinate
    # was the revision hash, so runs of one LLM given by Hub name and by path were two models
    snapshot = tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / "7ae557"
    build_tiny_model(snapshot)
    assert (
        _load_model(TrainConfig(model=str(snapshot)), tmp_path)[2] == "Qwen/Qwen2.5-0.5B-Instruct"
    )
    (tmp_path / "gsm.jsonl").write_text(json.dumps({"question": "q", "answer": "#### 1"}))
    assert load_prompt_dataset("~/gsm.jsonl")["answer"] == ["#### 1"]


def test_a_model_that_cannot_be_loaded_is_one_error_line_and_leaves_no_run_directory(
    tmp_path, monkeypatch, capsys
):
    # a missing relative model path ("models/qwen/final") went to the Hub as a repo id and an
    # unreachable Hub model ended in transformers' OSError: a traceback, not an error line
    import transformers

    from bayes_grpo.cli import main as cli_main

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", offline)
    argv = ["--steps", "1", "-G", "2", "--prompts-per-step", "2"]
    for model, message in [
        (
            "some-org/some-model",
            "some-org/some-model: cannot load the model: We couldn't connect to "
            "'https://huggingface.co' to load the files.",
        ),
        ("models/qwen/final", "models/qwen/final: model directory not found"),
    ]:
        assert cli_main(["train", str(tmp_path / "run"), "--model", model, *argv]) == 2
        assert capsys.readouterr().err.strip() == f"bayes-grpo train: error: {message}"
        assert not (tmp_path / "run").exists()


def test_a_folder_that_is_not_a_whole_model_is_one_error_line_naming_it(tmp_path, capsys):
    # an empty folder gave transformers' five-line "Couldn't instantiate the backend tokenizer"
    # without naming it; a model folder without its tokenizer files loaded an empty tokenizer
    # and ended in an IndexError traceback from TRL's generation
    from bayes_grpo.cli import main as cli_main
    from bayes_grpo.train.tiny import build_tiny_model

    empty = tmp_path / "empty"
    empty.mkdir()
    no_tokenizer = build_tiny_model(tmp_path / "no_tokenizer")
    for f in no_tokenizer.glob("tokenizer*"):
        f.unlink()
    # transformers' words cut after their first line: "cannot load the model: Couldn't
    # instantiate the backend tokenizer from one of", the list it introduces left out
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text('{"model_type": "nosuchtype"}')
    capsys.readouterr()  # transformers' progress bar of the save
    for model, problem in (
        (empty, "not a model directory (no config.json)"),
        (no_tokenizer, "no vocabulary"),
        (
            unknown,
            "cannot load the model: Couldn't instantiate the backend tokenizer from one of: (1) a "
            "`tokenizers` library serialization file, (2) a slow tokenizer",
        ),
    ):
        run_dir = tmp_path / "run"
        args = ["train", str(run_dir), "--model", str(model), "-G", "2", "--steps", "1"]
        assert cli_main([*args, "--prompts-per-step", "1", "--threads", "1"]) == 2
        err = capsys.readouterr().err
        assert f"{model}: " in err and problem in err, err
        assert len(err.strip().splitlines()) == 1 and not run_dir.exists()


def test_a_run_directory_under_the_home_folder_is_one_folder(tmp_path, monkeypatch):
    # `train "~/runs/x"` wrote its log into ./~/runs/x while transformers, which expands "~" in
    # its output_dir, made (and would put checkpoints in) $HOME/runs/x
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    ckpt = {"save_strategy": "steps", "save_steps": 1}
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=1, extra_grpo_args=ckpt)
    result = run_training(cfg, "~/runs/x", threads=1)
    run_dir = tmp_path / "home" / "runs" / "x"
    assert result.run_dir == run_dir and not (tmp_path / "~").exists()
    assert {"bayes_grpo_run.json", "trainer_state.json", "checkpoint-1"} <= {
        p.name for p in run_dir.iterdir()
    }


def test_a_gsm8k_row_without_a_gold_number_is_named_before_training(tmp_path, capsys):
    # the reward raised "GSM8K answer has no number: 'four'" when that row was first drawn (on a
    # large set, hours in), naming neither the dataset file nor the row
    from bayes_grpo.cli import main as cli_main
    from bayes_grpo.train.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "mini-lm", n_positions=64)
    data = tmp_path / "gsm.jsonl"
    rows = [{"question": "1+1?", "answer": "#### 2"}, {"question": "2+2?", "answer": "four"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_dir = tmp_path / "run"
    argv = ["train", str(run_dir), "--task", "gsm8k", "--dataset", str(data), "-G", "2"]
    argv += ["--model", str(model), "--max-completion-length", "4", "--prompts-per-step", "2"]
    assert cli_main([*argv, "--steps", "1", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{data}: 1 row has an 'answer' with no number" in err and "row 1, 'four'" in err
    assert not run_dir.exists()


def test_a_process_count_the_launch_does_not_have_is_an_error_naming_its_option(tmp_path):
    # "launched on 1 processes but num_processes=2": neither the option to change nor the run
    err = re.escape(
        f"{tmp_path / 'np2'}: launched on 1 process but num_processes=2 (--num-processes); "
        "prompts_per_step is split over num_processes, so set it to match"
    )
    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=1, num_processes=2)
    with pytest.raises(ValueError, match=f"^{err}$"):
        run_training(cfg, tmp_path / "np2", threads=1)
    assert not (tmp_path / "np2").exists()


def test_a_runs_thread_count_is_put_back_after_it(tmp_path):
    # run_training(..., threads=1) left torch at one CPU thread for the rest of a Python session
    # (a sweep's analysis, another model after it), which it does not say
    import torch

    before = torch.get_num_threads()
    own = 3 if before != 3 else 2
    torch.set_num_threads(own)
    try:
        cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=1)
        run_training(cfg, tmp_path / "run", threads=1)
        assert torch.get_num_threads() == own
    finally:
        torch.set_num_threads(before)


def test_device_auto_trains_without_a_bf16_gpu(tmp_path):
    # device="auto" ("GPU with bf16 when present") was refused on a machine without a bf16 GPU:
    # TRL defaults bf16 to True and transformers then asks for use_cpu
    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=2, device="auto")
    result = run_training(cfg, tmp_path / "auto", threads=1)
    frame, meta = read_run_dir(result.run_dir)
    assert len(frame) == 2 and meta["config"]["device"] == "auto"


def test_a_custom_task_trains_on_a_dataset_given_in_memory(tmp_path):
    # run_training(..., train_dataset=ds) is documented as the way to pass a datasets.Dataset,
    # but a gsm8k/custom config without a dataset name was refused ("needs a dataset")
    from datasets import Dataset

    def always_one(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    cfg = TrainConfig(
        task="custom", group_size=2, prompts_per_step=2, max_steps=1, max_completion_length=3
    )
    ds = Dataset.from_list([{"prompt": f"next {d} ="} for d in range(4)])
    result = run_training(cfg, tmp_path / "mem", reward_funcs=[always_one], train_dataset=ds)
    frame, meta = read_run_dir(result.run_dir)
    assert frame["reward"].tolist() == [1.0] and meta["dataset"] == "<train_dataset>"


def test_conversational_prompts_for_a_model_without_a_chat_template_are_refused_before_training(
    tmp_path,
):
    # TRL failed at the first step, in transformers' words naming neither the prompts nor the
    # model ("Cannot use chat template functions because tokenizer.chat_template is not set ...")
    from datasets import Dataset

    def always_one(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    cfg = TrainConfig(
        task="custom", group_size=2, prompts_per_step=2, max_steps=1, max_completion_length=3
    )
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": "next 1 ="}]}] * 4)
    match = (
        r"^<train_dataset>: conversational prompts \(\[\{'role': 'user', 'content': 'next 1 ='\}\]\) "
        r"but the model tiny has no chat template to write them as text"
    )
    with pytest.raises(ValueError, match=match):
        run_training(cfg, tmp_path / "chat", reward_funcs=[always_one], train_dataset=ds)
    assert not (tmp_path / "chat").exists()


def test_a_prompt_set_smaller_than_one_rollout_is_refused_before_training(tmp_path):
    # TRL's sampler yields only whole rollouts: 3 prompts for a rollout of 2 x k_ref 2 = 4 gave
    # no batch, transformers "trained" 0 steps without an error and the run was written as
    # completed (the CLI printed "3 steps ... final reward nan"; read_run_dir: KeyError 'step')
    from datasets import Dataset

    def always_one(prompts, completions, **kwargs):
        return [1.0] * len(completions)

    cfg = TrainConfig(
        task="custom",
        group_size=2,
        prompts_per_step=2,
        k_ref=2,
        max_steps=3,
        max_completion_length=3,
    )
    ds = Dataset.from_list([{"prompt": f"next {d} ="} for d in range(3)])
    out = tmp_path / "small"
    with pytest.raises(
        ValueError, match=r"3 prompts, fewer than the 4 prompts one rollout.*--k-ref"
    ):
        run_training(cfg, out, reward_funcs=[always_one], train_dataset=ds, threads=1)
    assert not out.exists()


def test_a_reward_function_that_cannot_take_trls_arguments_is_refused_before_training(
    tmp_path, monkeypatch, capsys
):
    # `train runs/x --reward mod:f` with `def f(completions)` ended in a TypeError traceback from
    # inside TRL at the first step ("f() got an unexpected keyword argument 'prompts'"); one
    # without the dataset's columns (the next_digit task's 'answer') the same
    import sys

    from bayes_grpo.cli import main as cli_main

    def no_kwargs(completions):
        return [0.0] * len(completions)

    def no_answer(prompts, completions, completion_ids, trainer_state, log_extra, log_metric):
        return [0.0] * len(completions)

    cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=1)
    with pytest.raises(ValueError, match=r"^reward function 'no_kwargs' cannot take .*'prompts'"):
        run_training(cfg, tmp_path / "a", reward_funcs=[no_kwargs])
    with pytest.raises(ValueError, match=r"^reward function 'no_answer' cannot take .*'answer'"):
        run_training(cfg, tmp_path / "b", reward_funcs=[no_answer], threads=1)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the dry run refuses it too
    (tmp_path / "bg_qa_no_kwargs.py").write_text("def f(completions):\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bg_qa_no_kwargs", raising=False)
    capsys.readouterr()  # what the runs above printed
    argv = ["train", str(tmp_path / "c"), "--reward", "bg_qa_no_kwargs:f", "--dry-run"]
    assert cli_main(argv) == 2
    (said,) = capsys.readouterr().err.strip().splitlines()
    assert said.startswith("bayes-grpo train: error: reward function 'f' cannot take ")


def test_a_reward_model_given_by_name_is_recorded_by_that_name(tmp_path):
    # reward_funcs=["path/or/hub-name"] trained with the reward model, but bayes_grpo_run.json
    # recorded its reward function as "str" (the type of the name)
    from transformers import GPT2Config, GPT2ForSequenceClassification

    from bayes_grpo.train.tiny import build_tiny_model

    rm = build_tiny_model(tmp_path / "rm-lm", seed=2)
    rm_config = GPT2Config.from_pretrained(rm)
    rm_config.num_labels = 1
    GPT2ForSequenceClassification(rm_config).save_pretrained(rm)
    cfg = TrainConfig(group_size=2, prompts_per_step=1, max_steps=1)
    result = run_training(cfg, tmp_path / "run", reward_funcs=[str(rm)], threads=1)
    frame, meta = read_run_dir(result.run_dir)
    assert meta["reward_funcs"] == [str(rm)]
    assert "rewards/rm-lm/mean" in frame.columns


def test_a_rollout_reused_by_steps_per_generation_is_sliced_at_random_not_by_prompt(
    tmp_path, monkeypatch
):
    # The docs said each optimizer step of --k-ref-via steps_per_generation trains on "a fresh
    # slice of prompts_per_step prompts"; TRL 1.16 shuffles the rollout's completions before
    # slicing it, so a step's prompts_per_step x G completions come from any of its prompts
    import trl
    from datasets import Dataset

    seen = []
    original = trl.GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        seen.append({tuple(row.tolist()) for row in inputs["prompt_ids"]})
        assert len(inputs["prompt_ids"]) == 2 * 4  # prompts_per_step x G completions
        return original(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", spy)

    def alternate(prompts, completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]

    cfg = TrainConfig(
        task="custom",
        group_size=4,
        prompts_per_step=2,
        k_ref=2,
        max_steps=2,
        max_completion_length=2,
    )
    ds = Dataset.from_list([{"prompt": f"next {d} ="} for d in range(4)])
    run_training(cfg, tmp_path / "r", reward_funcs=[alternate], train_dataset=ds, threads=1)
    assert len(seen) == 2 and all(len(prompts) > 2 for prompts in seen)


def test_a_model_and_a_run_directory_given_as_dot_folders_are_named_by_their_folders(
    tmp_path, monkeypatch
):
    # --model . (or ..) recorded the model coordinate as "" (Path(".").name), and a run
    # directory "." the run_id "": every such run ingested as one LLM with an empty name
    from bayes_grpo.train.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "mini-lm", seed=1)
    (model_dir / "run1").mkdir()
    monkeypatch.chdir(model_dir / "run1")
    cfg = TrainConfig(model="..", group_size=2, prompts_per_step=1, max_steps=1)
    run_training(cfg, ".", threads=1)
    _, meta = read_run_dir(".")
    assert meta["model"] == "mini-lm" and meta["run_id"] == "run1"


def test_a_streamed_prompt_set_trains_and_one_without_a_whole_rollout_is_an_error(tmp_path):
    # train_dataset=<IterableDataset> (TRL takes one) failed in the context check with an
    # AttributeError ('IterableDataset' object has no attribute 'select'); a stream shorter than
    # one rollout then "trained" 0 steps, written as a completed run (read_run_dir: KeyError)
    from datasets import Dataset

    def alternate(prompts, completions, **kwargs):
        return [float(i % 2) for i in range(len(completions))]

    cfg = TrainConfig(
        task="custom", group_size=2, prompts_per_step=2, max_steps=2, max_completion_length=3
    )
    rows = [{"prompt": f"next {d} ="} for d in range(4)]
    stream = Dataset.from_list(rows).to_iterable_dataset()
    result = run_training(cfg, tmp_path / "ok", reward_funcs=[alternate], train_dataset=stream)
    frame, meta = read_run_dir(result.run_dir)
    assert frame["reward"].tolist() == [0.5, 0.5] and meta["completed"] is True
    short = Dataset.from_list(rows[:1]).to_iterable_dataset()
    with pytest.raises(ValueError, match="trained no step; the prompts gave no whole rollout of 2"):
        run_training(cfg, tmp_path / "short", reward_funcs=[alternate], train_dataset=short)
    assert not (tmp_path / "short").exists()


def test_a_shorter_run_with_the_same_seed_trains_on_the_first_prompts_of_a_longer_one(tmp_path):
    # the next_digit prompt set was sized by max_steps, and TRL shuffles it by its size: a run of
    # 4 steps drew other prompts from step 0 than a run of 2 steps with the same seed
    seen: dict[int, list[str]] = {}

    def recorded(steps):
        def reward(prompts, completions, **kwargs):
            seen.setdefault(steps, []).extend(prompts)
            return [0.0] * len(prompts)

        return reward

    frames, metas = {}, {}
    for steps in (2, 4):
        cfg = TrainConfig(group_size=2, prompts_per_step=2, max_steps=steps, seed=3)
        run_training(cfg, tmp_path / f"s{steps}", reward_funcs=[recorded(steps)])
        frames[steps], metas[steps] = read_run_dir(tmp_path / f"s{steps}")
    assert len(seen[4]) == 2 * len(seen[2]) == 16
    assert seen[2] == seen[4][:8]
    for col in ("num_tokens", "completions/mean_length"):
        np.testing.assert_array_equal(frames[2][col].to_numpy(), frames[4][col].to_numpy()[:2])
    # the size the runs used is recorded: their settings rebuild them
    assert metas[2]["config"]["n_prompts"] == metas[4]["config"]["n_prompts"] >= 8


def test_a_prompt_set_given_to_the_next_digit_task_is_refused_not_ignored(tmp_path):
    from datasets import Dataset

    prompts = Dataset.from_list([{"prompt": "next 1 ="}] * 4)
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="train_dataset given with task 'next_digit'"):
        run_training(TrainConfig(group_size=2, max_steps=1), out, train_dataset=prompts)
    assert not out.exists()
