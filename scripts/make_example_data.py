#!/usr/bin/env python
"""Regenerate the shipped example runs in ``data/`` from seeds (real TRL GRPO runs, CPU only).

Every run is the tiny offline GPT-2 (``bayes_grpo.train.tiny``) on the "next digit" task,
300 optimizer steps, through :func:`bayes_grpo.train.run_training`. A run directory holds
``trainer_state.json`` (TRL's log, stored without indentation to keep ``data/`` small) and
``bayes_grpo_run.json`` (hyperparameters in the run-set coordinate names); no weights.

Groups (a run can belong to several; see ``data/README.md`` for what each group supports):

- ``g_fixed_completions``: G=4 x 32 prompts and G=16 x 8 prompts (128 completions/step), seeds 0-2
- ``g_fixed_prompts``:     G=4 x 8 prompts and G=16 x 8 prompts (8 prompts/step), seeds 0-2
- ``lr_ladder``:           G=16 x 8, learning rate 5e-4, 1e-3, 2e-3, 4e-3, seed 0
- ``k_ref_ladder``:        G=16 x 8, K_ref = 1, 2, 4, 8, seed 0
- ``sgd_momentum``:        G=16 x 8, SGD lr 0.03 with heavy-ball momentum 0.9, seed 0

Usage::

    python scripts/make_example_data.py                 # every missing run (about 16 x 20-50 s)
    python scripts/make_example_data.py --only k_ref    # runs whose id contains "k_ref"... or group
    python scripts/make_example_data.py --force         # redo existing runs

Runs are independent and skipped when complete, so the script can be stopped and resumed;
``data/index.json`` (groups, settings, wall time and final reward of each run) is rewritten at the
end of every run. Torch uses one thread (``--threads``) so it can share a CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STEPS = 300
BASE = {"group_size": 16, "prompts_per_step": 8, "learning_rate": 1e-3, "max_steps": STEPS}


def run_id(cfg: dict) -> str:
    """Directory name from the knobs that vary across the example runs."""
    opt = cfg.get("optimizer", "adamw")
    return (
        f"g{cfg['group_size']}_p{cfg['prompts_per_step']}_lr{cfg['learning_rate']:g}"
        f"_k{cfg.get('k_ref', 1)}_{opt}_s{cfg['seed']}"
    )


def plan() -> tuple[dict[str, dict], dict[str, list[str]]]:
    """All runs ``{run_id: TrainConfig kwargs}`` and groups ``{group: [run_id, ...]}``."""
    runs: dict[str, dict] = {}
    groups: dict[str, list[str]] = {}

    def add(group: str, **changes: object) -> None:
        cfg = {**BASE, **changes}
        # the prompt set the shipped runs were made with: the run's prompts plus one rollout (the
        # runner's default then; it is now a fixed NEXT_DIGIT_PROMPTS), so they regenerate as shipped
        pps = cfg["prompts_per_step"]
        cfg.setdefault("n_prompts", STEPS * pps + pps * cfg.get("k_ref", 1))
        rid = run_id(cfg)
        runs[rid] = cfg
        groups.setdefault(group, []).append(rid)

    for seed in (0, 1, 2):
        add("g_fixed_completions", group_size=4, prompts_per_step=32, seed=seed)
        add("g_fixed_completions", group_size=16, prompts_per_step=8, seed=seed)
    for seed in (0, 1, 2):
        add("g_fixed_prompts", group_size=4, prompts_per_step=8, seed=seed)
        add("g_fixed_prompts", group_size=16, prompts_per_step=8, seed=seed)
    for lr in (5e-4, 1e-3, 2e-3, 4e-3):
        add("lr_ladder", learning_rate=lr, seed=0)
    for k_ref in (1, 2, 4, 8):
        add("k_ref_ladder", k_ref=k_ref, seed=0)
    add("sgd_momentum", optimizer="sgd", learning_rate=0.03, momentum=0.9, seed=0)
    return runs, groups


def _compact_trainer_state(run_dir: Path) -> None:
    from bayes_grpo._io import write_text_atomic

    path = run_dir / "trainer_state.json"
    state = json.loads(path.read_text(encoding="utf-8"))
    write_text_atomic(path, json.dumps(state, separators=(",", ":")) + "\n")


def _write_index(out: Path, runs: dict[str, dict], groups: dict[str, list[str]]) -> None:
    from bayes_grpo._io import write_text_atomic

    index = {"groups": groups, "runs": {}}
    for rid in runs:
        meta_path = out / rid / "bayes_grpo_run.json"
        if not meta_path.is_file():
            continue
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        index["runs"][rid] = {
            k: meta.get(k)
            for k in (
                "group_size",
                "prompts_per_step",
                "completions_per_step",
                "learning_rate",
                "optimizer",
                "momentum",
                "momentum_convention",
                "k_ref",
                "beta",
                "seed",
                "max_steps",
                "final_reward",
                "wall_time_s",
            )
        }
    write_text_atomic(out / "index.json", json.dumps(index, indent=1) + "\n")


def summarise(out: Path) -> list[dict]:
    """Per run: group(s), knobs, final reward, first step the smoothed reward reaches 0.5.

    The reward is smoothed with a centred moving average over 11 logged points; ``t50`` is None
    when it never reaches 0.5. ``zero_spread_0_50`` is the mean share of zero-spread groups over
    the first 50 steps (the slow-start phase).
    """
    import numpy as np

    from bayes_grpo.train import read_run_dir

    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    rows = []
    for rid, info in index["runs"].items():
        frame, _ = read_run_dir(out / rid)
        reward = frame["reward"].dropna()
        smooth = reward.rolling(11, center=True, min_periods=6).mean()
        above = smooth.index[(smooth >= 0.5).to_numpy()]
        zero = frame["dynamics/frac_zero_spread_groups"]
        rows.append(
            {
                "run": rid,
                "groups": ",".join(g for g, ids in index["groups"].items() if rid in ids),
                "G": info["group_size"],
                "prompts": info["prompts_per_step"],
                "lr": info["learning_rate"],
                "k_ref": info["k_ref"],
                "opt": info["optimizer"],
                "final_reward": round(float(reward.iloc[-max(1, len(reward) // 10) :].mean()), 3),
                "t50": int(above[0]) if len(above) else None,
                "zero_spread_0_50": round(float(np.mean(zero.loc[:50])), 3),
                "wall_s": info["wall_time_s"],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "data" / "tiny", help="output folder")
    parser.add_argument("--only", help="only runs whose id or group contains this text")
    parser.add_argument("--force", action="store_true", help="redo runs that already exist")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--list", action="store_true", help="print the plan and exit")
    parser.add_argument(
        "--summary", action="store_true", help="print a table of the existing runs and exit"
    )
    args = parser.parse_args(argv)

    runs, groups = plan()
    member = {rid: [g for g, ids in groups.items() if rid in ids] for rid in runs}
    selected = [
        rid
        for rid in runs
        if not args.only or args.only in rid or any(args.only in g for g in member[rid])
    ]
    if args.summary:
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(pd.DataFrame(summarise(args.out)).to_string(index=False))
        return 0
    if args.list:
        for rid in selected:
            print(rid, ",".join(member[rid]))
        return 0

    import warnings

    from transformers.utils import logging as hf_logging

    from bayes_grpo._io import write_text_atomic
    from bayes_grpo.train import TrainConfig, run_training

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore")
    args.out.mkdir(parents=True, exist_ok=True)
    for i, rid in enumerate(selected, 1):
        run_dir = args.out / rid
        done = (run_dir / "bayes_grpo_run.json").is_file() and (
            run_dir / "trainer_state.json"
        ).is_file()
        if done and not args.force:
            print(f"[{i}/{len(selected)}] {rid}: exists, skipped", flush=True)
            continue
        config = TrainConfig(**runs[rid])
        start = time.perf_counter()
        result = run_training(config, run_dir, overwrite=True, threads=args.threads)
        _compact_trainer_state(run_dir)
        # record the outcome in the metadata (final reward: mean over the last 10% of logged steps)
        meta = dict(result.metadata, final_reward=round(result.final_reward, 4), groups=member[rid])
        write_text_atomic(run_dir / "bayes_grpo_run.json", json.dumps(meta, indent=2) + "\n")
        _write_index(args.out, runs, groups)
        print(
            f"[{i}/{len(selected)}] {rid}: final reward {result.final_reward:.3f}, "
            f"train {result.wall_time_s:.1f} s, total {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    _write_index(args.out, runs, groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
