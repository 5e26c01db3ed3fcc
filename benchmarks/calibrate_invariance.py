"""Calibrate the G-invariance Bayes factors on simulated run sets with known truth.

Three families of run sets, each with one LLM at G = 4 and G = 16 (``--seeds`` runs per G):

* ``h0``: SDE run sets (:func:`bayes_grpo.dynamics.simulate.simulate_sde_runset`) whose
  trajectory is shared across G (only the noise scales as 1/G). Target: BF01 > 3 in >= 80%.
* ``shift``: the same, with the plateau at G = 16 shifted by ``--shift`` (0.08) from
  G = 4. Target: BF10 > 3 in >= 80%.
* ``bandit``: softmax-bandit GRPO runs (:func:`bayes_grpo.bandit.simulate_bandit`) at
  G = 4 and 16 (the exact reduction: invariant by construction). Target: invariant.

Both methods (SMC evidence; Savage–Dickey on the H1 offsets, from the SMC posterior) are
computed; the agreement target is |log BF_smc - log BF_sd| <= 1 on >= 80% of the sets where
both apply (Savage–Dickey "applies" when 0 lies inside the bulk of the posterior draws of
the offsets; otherwise its density at 0 is an extrapolation).

The true parameters of each set are drawn at random (stiffness, plateau, initial reward),
so the calibration is not tuned to one curve. Each set's result is appended to a JSON-lines
file as soon as it is done, so a partial run is reportable; ``--summarise`` prints the
summary of an existing file.

Example::

    nohup .venv/bin/python benchmarks/calibrate_invariance.py --n-sets 20 \
        --out benchmarks/results/invariance_calibration.jsonl > /tmp/calib.log 2>&1 &
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from bayes_grpo._io import write_text_atomic


def sde_set(index: int, *, shift: float, seeds: int, n_steps: int, log_every: int, noise: str):
    """One simulated run set (truth drawn from ``index``)."""
    from bayes_grpo.dynamics.simulate import simulate_sde_runset
    from bayes_grpo.runset import concat_runsets

    rng = np.random.default_rng(10_000 + index)
    spec = {
        "stiffness": float(np.exp(rng.uniform(np.log(20), np.log(80)))),
        "plateau": float(rng.uniform(0.5, 0.8)),
        "initial_reward": float(rng.uniform(0.1, 0.3)),
        "noise_d": 0.0 if noise == "measurement" else 4e-6,
    }
    kw = dict(
        learning_rates=(1e-3,),
        momentum=0.9,
        convention="ema",
        k_refs=(1,),
        n_seeds=seeds,
        n_steps=n_steps,
        log_every=log_every,
        measurement_sd=0.08 if noise == "measurement" else 0.02,
        measurement_g_exponent=1.0,
    )
    a = simulate_sde_runset(models={"sim": spec}, group_sizes=(4,), random_seed=2 * index, **kw)
    b = simulate_sde_runset(
        models={"sim": spec | {"plateau": spec["plateau"] + shift}},
        group_sizes=(16,),
        random_seed=2 * index + 1,
        **kw,
    )
    return concat_runsets([a, b]), spec


def bandit_set(index: int, *, seeds: int, n_steps: int, log_every: int):
    """Softmax-bandit runs at G = 4 and 16, one setting (invariant by construction)."""
    from bayes_grpo.bandit import simulate_bandit

    ds = simulate_bandit(
        k_ref=1,
        group_size=[4, 16],
        learning_rate=0.1,
        momentum=0.5,
        beta=1.0,
        seeds=seeds,
        steps=n_steps,
        seed=1000 + index,
    )
    keep = ds["step"].values[::log_every]
    ds = ds.sel(step=keep)
    return ds[["reward"]], {"learning_rate": 0.1, "momentum": 0.5, "k_ref": 1}


def make_set(kind: str, index: int, args):
    """The run set ``index`` of family ``kind`` under the command's settings, and its truth."""
    if kind == "bandit":
        return bandit_set(
            index, seeds=args.seeds, n_steps=args.bandit_steps, log_every=args.log_every
        )
    return sde_set(
        index,
        shift=args.shift if kind == "shift" else 0.0,
        seeds=args.seeds,
        n_steps=args.n_steps,
        log_every=args.log_every,
        noise=args.noise,
    )


def resume_mismatch(rows: list[dict], args) -> str | None:
    """Why the finished ``rows`` of ``--out`` are not sets of this command, or None.

    A resumed run keeps them beside the sets it adds; a set of other settings (other step
    counts: ``--n-steps 100 --log-every 4`` logged 26 points before ``simulate_sde_runset``'s
    ``n_steps`` counted logged steps, 25 now; another likelihood or noise) would be summarised
    with them without a word.
    """
    points: dict[str, int] = {}
    for r in rows:
        kind = r["kind"]
        if kind not in points:
            points[kind] = int(make_set(kind, r["index"], args)[0].sizes["step"])
        if "n_steps" in r and r["n_steps"] != points[kind]:
            return (
                f"set {kind} {r['index']} has {r['n_steps']} logged steps per run, these settings "
                f"give {points[kind]}"
            )
        for key in ("likelihood", "noise"):
            if key in r and r[key] != getattr(args, key):
                return f"set {kind} {r['index']} has {key} {r[key]!r}, not {getattr(args, key)!r}"
    return None


def run_one(kind: str, index: int, args) -> dict:
    from bayes_grpo.checks.bayes_factor import savage_dickey_importance
    from bayes_grpo.checks.invariance import (
        alpha_summary,
        invariance_bayes_factor,
        invariance_verdict,
    )

    ds, spec = make_set(kind, index, args)
    start = time.perf_counter()
    table, fits = invariance_bayes_factor(
        ds,
        likelihood=args.likelihood,
        prior_scales=(1.0,),
        draws=args.draws,
        tune=args.tune,
        chains=args.chains,
        target_accept=args.target_accept,
        sd_method="gaussian",
        smc_draws=args.smc_draws,
        smc_chains=args.chains,
        random_seed=index,
    )
    row = table.loc[1.0]
    passed, _ = invariance_verdict(
        row["log_bf01_bridge"], row["log_bf01_sd"], bool(row["sd_in_support"])
    )
    alpha = alpha_summary((fits.h1[1.0] if passed is False else fits.h0).posterior.idata.posterior)
    # the other Savage-Dickey density estimator on the same H1 draws (diagnostic)
    post = fits.h1[1.0].posterior
    names = [n for n in post.names if "group_offset" in n]
    idx = post.index_of(names)
    sd_is = savage_dickey_importance(post, idx, float(row["sd_log_prior_density"]))
    return {
        "kind": kind,
        "index": index,
        "truth": spec,
        "n_runs": int(ds.sizes["run"]),
        "n_steps": int(ds.sizes["step"]),
        "likelihood": args.likelihood,
        "noise": args.noise,
        "nuts": {"draws": args.draws, "tune": args.tune, "chains": args.chains},
        "passed": passed,
        "log_bf01_bridge": float(row["log_bf01_bridge"]),
        "log_bf01_bridge_mc_error": float(row["log_bf01_bridge_mc_error"]),
        "log_bf01_sd": float(row["log_bf01_sd"]),
        "log_bf01_sd_mc_error": float(row["log_bf01_sd_mc_error"]),
        "sd_in_support": bool(row["sd_in_support"]),
        "log_bf01_sd_importance": sd_is.log_bf01,
        "log_bf01_sd_importance_mc_error": sd_is.mc_error,
        "log_bf01_smc": float(row["log_bf01_smc"]),
        "log_bf01_smc_mc_error": float(row["log_bf01_smc_mc_error"]),
        "methods_agree": bool(row["agree"]),
        "divergences": [int(row["divergences_h0"]), int(row["divergences_h1"])],
        "alpha_median": alpha["alpha_median"],
        "alpha_lo": alpha["alpha_lo"],
        "alpha_hi": alpha["alpha_hi"],
        "seconds": time.perf_counter() - start,
    }


def summarise(rows: list[dict]) -> dict:
    """Shares per family; rows of the older SMC-only layout are summarised as before."""
    out: dict = {}
    log3 = float(np.log(3))
    for kind in ("h0", "shift", "bandit"):
        sub = [r for r in rows if r["kind"] == kind]
        if not sub:
            continue
        new = "log_bf01_bridge" in sub[0]
        first = np.array([r["log_bf01_bridge" if new else "log_bf01_smc"] for r in sub])
        sd = np.array([r["log_bf01_sd"] for r in sub])
        both = np.array([bool(r["sd_in_support"]) for r in sub])
        sign = 1.0 if kind in ("h0", "bandit") else -1.0
        agree = np.abs(first - sd) <= 1.0
        alpha_cover = np.array([r["alpha_lo"] <= 1.0 <= r["alpha_hi"] for r in sub])
        name = "bridge" if new else "smc"
        res = {
            "n_sets": len(sub),
            "indices": sorted(r["index"] for r in sub),
            f"frac_correct_{name} (BF>3 for the truth)": float(np.mean(sign * first > log3)),
            "frac_correct_savage_dickey": float(np.mean(sign * sd > log3)),
            "n_sd_applies": int(both.sum()),
            f"frac_agree_{name}_sd_within_1_where_sd_applies": float(np.mean(agree[both]))
            if both.any()
            else None,
            f"frac_agree_{name}_sd_within_1_all": float(np.mean(agree)),
            f"median_log_bf01_{name}": float(np.median(first)),
            "median_log_bf01_sd": float(np.median(sd)),
            f"median_abs_diff_{name}_sd": float(np.median(np.abs(first - sd))),
            f"median_mc_error_{name}": float(
                np.nanmedian([r[f"log_bf01_{name}_mc_error"] for r in sub])
            ),
            "frac_alpha_90ci_covers_1": float(np.mean(alpha_cover)),
            "median_alpha": float(np.median([r["alpha_median"] for r in sub])),
            "median_seconds": float(np.median([r["seconds"] for r in sub])),
        }
        if new:
            sd_is = np.array([r["log_bf01_sd_importance"] for r in sub])
            res["median_log_bf01_sd_importance"] = float(np.median(sd_is))
            res["frac_agree_bridge_sd_importance_within_1_all"] = float(
                np.mean(np.abs(first - sd_is) <= 1.0)
            )
            res["n_sets_with_divergences"] = int(sum(sum(r["divergences"]) > 0 for r in sub))
        out[kind] = res
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--n-sets", type=int, default=20, help="run sets per simulated family (h0, shift)"
    )
    p.add_argument("--bandit-sets", type=int, default=5, help="bandit run sets")
    p.add_argument(
        "--start", type=int, default=0, help="first set index (to split the work between processes)"
    )
    p.add_argument("--seeds", type=int, default=2, help="runs per group size")
    p.add_argument("--n-steps", type=int, default=120)
    p.add_argument("--bandit-steps", type=int, default=120)
    p.add_argument("--log-every", type=int, default=2)
    p.add_argument("--shift", type=float, default=0.08)
    p.add_argument(
        "--noise",
        choices=["measurement", "sde"],
        default="measurement",
        help="measurement: i.i.d. noise with sd^2 ∝ 1/G (noise_d = 0); sde: SDE noise plus measurement noise",
    )
    p.add_argument("--likelihood", choices=["iid", "state_space"], default="iid")
    p.add_argument("--draws", type=int, default=500, help="NUTS draws per chain")
    p.add_argument("--tune", type=int, default=500, help="NUTS tuning steps per chain")
    p.add_argument("--target-accept", type=float, default=0.9)
    p.add_argument("--chains", type=int, default=2)
    p.add_argument(
        "--smc-draws", type=int, default=0, help="SMC particles per chain (0: no SMC figure)"
    )
    p.add_argument("--families", nargs="+", default=["h0", "shift", "bandit"])
    p.add_argument("--out", default="benchmarks/results/invariance_calibration.jsonl")
    p.add_argument("--summarise", action="store_true", help="only summarise an existing --out file")
    p.add_argument(
        "--merge", nargs="*", default=[], help="more result files to include in the summary"
    )
    args = p.parse_args()
    out = Path(args.out)
    if not args.summarise:
        warnings.filterwarnings("ignore")
        import logging

        logging.getLogger("pymc").setLevel(logging.ERROR)
        out.parent.mkdir(parents=True, exist_ok=True)
        done = set()
        if out.exists():
            finished = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            why = resume_mismatch(finished, args)
            if why:
                raise SystemExit(f"{out}: holds sets of other settings ({why}); use another --out")
            done = {(r["kind"], r["index"]) for r in finished}
        jobs = []
        for i in range(args.start, max(args.n_sets, args.bandit_sets)):
            for kind in args.families:
                limit = args.bandit_sets if kind == "bandit" else args.n_sets
                if i < limit and (kind, i) not in done:
                    jobs.append((kind, i))
        for kind, i in jobs:
            row = run_one(kind, i, args)
            # rewrite the file with one more line per finished set (a partial run stays usable)
            old = out.read_text() if out.exists() else ""
            write_text_atomic(out, old + json.dumps(row) + "\n")
            print(
                f"{kind:6s} {i:3d} log BF01 bridge {row['log_bf01_bridge']:8.2f} ± "
                f"{row['log_bf01_bridge_mc_error']:.2f} sd {row['log_bf01_sd']:8.2f} "
                f"({'in' if row['sd_in_support'] else 'out of'} support) sd-is "
                f"{row['log_bf01_sd_importance']:8.2f} alpha {row['alpha_median']:.2f} "
                f"{row['seconds']:.0f}s",
                flush=True,
            )
    rows = {}
    for path in [out, *map(Path, args.merge)]:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[(row["kind"], row["index"])] = row
    print(json.dumps(summarise(list(rows.values())), indent=2))


if __name__ == "__main__":
    main()
