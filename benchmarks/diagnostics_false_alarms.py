"""False alarms of the failure-mode diagnostics on healthy simulated runs.

A practitioner runs ``diagnose`` on healthy runs most of the time; each mode flagged there is a
false alarm. This script simulates the healthy built-in cases of
``bayes_grpo.diagnostics.cases`` (``healthy``, ``healthy_noisy``, ``healthy_wandering``,
``healthy_reward_only``; optionally the healthy softmax-bandit settings) over many seeds and
run lengths, diagnoses each with the default thresholds and counts, per mode, the runs it
flagged among those it could assess.

Logging variants of the simulated cases (a run logs what its trainer logs):

* ``eval10``: as simulated, an evaluation every 10 steps (a 30-step run then has too few
  evaluations for the train-eval decoupling, which is reported as not assessable);
* ``eval20pts``: an evaluation every ``n_steps // 20`` steps (20 evaluations, for the short runs);
* ``kl``: as ``eval10`` plus a KL to the reference that builds up while the policy learns and
  levels off (anchored), ``0.03 (1 - exp(-t / (0.15 n)))`` with 20% log-normal noise;
* ``no_side``: reward and group statistics only (no evaluation, entropy or side quantities).

Nominal rates the detectors state (their docstrings and ``DiagnosticsConfig``):

* reward hacking: the lower end of a 90% bootstrap interval of ``d = gain_train - gain_eval``
  above ``decoupling_threshold`` = 0.1: a one-sided 5% test of ``d <= 0.1``, so at most 5%
  on a run whose true ``d`` is 0 (far less when the window is fixed in advance);
* instability: spikes by a Fisher exact test at ``spike_alpha`` = 1%; an oscillation needs the
  upper end of a 90% interval of zeta below 1 (5% one-sided) and three further checks;
  growth needs a factor 3 with its interval above 1; so about 1-5% at most;
* advantage degeneracy, policy concentration: thresholds on effect sizes (a share of zero-spread
  groups above 50%, an entropy halved before half the reward's rise), no test level; a healthy
  run is far from them, so the rate should be about 0.

    .venv/bin/python benchmarks/diagnostics_false_alarms.py --seeds 50 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
import pandas as pd

from bayes_grpo.diagnostics import MODES, DiagnosticsConfig, diagnose
from bayes_grpo.diagnostics.cases import BANDIT_CASES, CASES, bandit_case, simulated_case

HEALTHY_CASES: tuple[str, ...] = tuple(name for name, modes in CASES.items() if not modes)
HEALTHY_BANDIT: tuple[str, ...] = tuple(
    name for name, (_, modes) in BANDIT_CASES.items() if not modes
)
VARIANTS: tuple[str, ...] = ("eval10", "eval20pts", "kl", "no_side")
#: Nominal false-alarm rate each mode states (see the module docstring).
NOMINAL: dict[str, str] = {
    "reward_hacking": "<= 5% (one-sided 90% interval bound above 0.1)",
    "advantage_degeneracy": "~0 (effect-size threshold, no test level)",
    "policy_concentration": "~0 (effect-size threshold, no test level)",
    "instability": "<= 1-5% (Fisher 1% for spikes; 90% interval for oscillation)",
}


def _variant(case: str, variant: str, seed: int, n_steps: int):
    eval_every = max(1, n_steps // 20) if variant == "eval20pts" else 10
    ds = simulated_case(case, seed=seed, n_steps=n_steps, eval_every=eval_every)
    if variant == "kl":
        rng = np.random.default_rng([seed, n_steps, 7])
        t = ds["step"].values.astype(float)
        kl = (
            0.03 * (1.0 - np.exp(-t / (0.15 * n_steps))) * np.exp(0.2 * rng.standard_normal(t.size))
        )
        ds = ds.assign(kl=(("run", "step"), kl[None, :]))
    if variant == "no_side":
        keep = [v for v in ("reward", "reward_std", "frac_reward_zero_std") if v in ds]
        ds = ds.drop_vars(
            [v for v in ds.data_vars if ds[v].dims == ("run", "step") and v not in keep]
        )
    return ds


def _rows(ds, config: DiagnosticsConfig, modes: list[str], **labels) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = diagnose(ds, config=config, modes=modes)
    out = []
    for r in results:
        ev = r.values.get("evidence") or {}
        row = {
            **labels,
            "run": r.values["run"],
            "mode": r.name,
            "verdict": None if r.passed is None else (not r.passed),
        }
        if r.name == "instability" and r.passed is False:
            row["signals"] = [s.get("signal") for s in ev.get("signals", []) if s.get("detected")]
        out.append(row)
    return out


def run(
    seeds: int,
    lengths: list[int],
    n_boot: int,
    seed: int,
    variants: list[str],
    bandit: bool,
    modes: list[str] | None = None,
    cases: list[str] | None = None,
) -> pd.DataFrame:
    modes = list(modes or MODES)
    cases = list(cases or HEALTHY_CASES + HEALTHY_BANDIT)
    config = DiagnosticsConfig.from_mapping({"common": {"figures": False, "n_boot": n_boot}})
    rows: list[dict] = []
    for n_steps in lengths:
        for case in [c for c in HEALTHY_CASES if c in cases]:
            for variant in variants:
                if case == "healthy_reward_only" and variant != "eval10":
                    continue  # logs the reward only whatever the variant
                if variant == "eval20pts" and max(1, n_steps // 20) == 10:
                    continue  # the same runs as eval10
                for s in range(seeds):
                    # each variant its own seeds: the runs of two variants are independent
                    run_seed = seed + s + 100_000 * VARIANTS.index(variant)
                    ds = _variant(case, variant, run_seed, n_steps)
                    rows += _rows(
                        ds,
                        config,
                        modes,
                        case=case,
                        variant=variant,
                        n_steps=n_steps,
                        seed=run_seed,
                    )
            print(f"  {n_steps} steps, {case}: done", file=sys.stderr, flush=True)
        if bandit:
            for case in [c for c in HEALTHY_BANDIT if c in cases]:
                ds = bandit_case(case, seeds=seeds, seed=seed, steps=n_steps)
                rows += _rows(
                    ds, config, modes, case=case, variant="bandit", n_steps=n_steps, seed=seed
                )
    return pd.DataFrame(rows)


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """(case, variant, n_steps) x mode cells ``"k/n"`` (flagged of assessed)."""
    cells = {}
    for (case, variant, n, mode), grp in frame.groupby(
        ["case", "variant", "n_steps", "mode"], sort=False
    ):
        assessed = grp["verdict"].notna()
        k = int(grp.loc[assessed, "verdict"].astype(bool).sum())
        cells[(case, variant, n, mode)] = f"{k}/{int(assessed.sum())}" if assessed.any() else "n/a"
    out = pd.Series(cells).unstack()
    return out.reindex(columns=[m for m in MODES if m in set(frame["mode"])])


def rates(frame: pd.DataFrame) -> dict[str, dict]:
    """Per mode and run length: flagged / assessed over every healthy case and variant."""
    out: dict[str, dict] = {}
    a = frame[frame["verdict"].notna()]
    for mode in [m for m in MODES if m in set(frame["mode"])]:
        m = a[a["mode"] == mode]
        out[mode] = {
            "nominal": NOMINAL[mode],
            "by_length": {
                str(n): {
                    "flagged": int(g["verdict"].astype(bool).sum()),
                    "assessed": int(len(g)),
                    "rate": float(g["verdict"].astype(bool).mean()),
                }
                for n, g in m.groupby("n_steps")
            },
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=20, help="seeds per cell (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument(
        "--lengths", default="30,60,200,1000", help="run lengths in steps (default 30,60,200,1000)"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"logging variants (default {','.join(VARIANTS)})",
    )
    parser.add_argument(
        "--n-boot", type=int, default=100, help="bootstrap replicates per result (default 100)"
    )
    parser.add_argument("--bandit", action="store_true", help="also the healthy bandit settings")
    parser.add_argument("--modes", default=",".join(MODES), help="modes to diagnose (default: all)")
    parser.add_argument(
        "--cases",
        default=",".join(HEALTHY_CASES + HEALTHY_BANDIT),
        help="healthy cases to simulate (default: all; the bandit ones need --bandit)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the verdicts and rates as JSON")
    args = parser.parse_args(argv)
    lengths = [int(v) for v in args.lengths.split(",") if v]
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; known: {list(VARIANTS)}")
    modes = [m for m in args.modes.split(",") if m]
    if set(modes) - set(MODES):
        parser.error(f"--modes: unknown {sorted(set(modes) - set(MODES))}; known: {list(MODES)}")
    cases = [c for c in args.cases.split(",") if c]
    known = HEALTHY_CASES + HEALTHY_BANDIT
    if set(cases) - set(known):
        parser.error(f"--cases: unknown {sorted(set(cases) - set(known))}; known: {list(known)}")
    t0 = time.perf_counter()
    frame = run(args.seeds, lengths, args.n_boot, args.seed, variants, args.bandit, modes, cases)
    tab = table(frame)
    summary = rates(frame)
    with pd.option_context(
        "display.width", 200, "display.max_columns", 10, "display.max_rows", 500
    ):
        print(tab.to_string())
    for mode, r in summary.items():
        parts = ", ".join(
            f"{n} steps {v['flagged']}/{v['assessed']} ({v['rate']:.1%})"
            for n, v in r["by_length"].items()
        )
        print(f"{mode}: {parts}; nominal {r['nominal']}")
    print(f"wall time {time.perf_counter() - t0:.1f} s")
    if args.json:
        from bayes_grpo._io import write_text_atomic

        payload = {
            "settings": vars(args),
            "rates": summary,
            "table": tab.reset_index().astype(str).to_dict(orient="records"),
            "runs": frame.replace({np.nan: None}).to_dict(orient="records"),
        }
        write_text_atomic(args.json, json.dumps(payload, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
