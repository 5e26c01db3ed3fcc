"""Build the self-contained HTML report from a fitted model and the results of the later stages.

The report is one HTML file (images embedded as PNG data URIs, no network) rendered from
the single Jinja2 template ``templates/report.html``. Sections are always present in a
fixed order; one whose inputs are absent says so.
"""

from __future__ import annotations

import datetime as _dt
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import numpy as np

from bayes_grpo import __version__
from bayes_grpo._arguments import checked_count, checked_seed
from bayes_grpo._io import HTML_SUFFIXES, check_suffix, refuse_non_regular_file, write_text_atomic
from bayes_grpo.checks.base import CheckResult
from bayes_grpo.constants import HDI_PROB
from bayes_grpo.report import model_sections
from bayes_grpo.report.sections import (
    Block,
    Section,
    checks_section,
    iter_results,
    overview_section,
    run_set_notes,
)

#: Section keys in report order.
SECTION_KEYS: tuple[str, ...] = (
    "overview",
    "fit",
    "convergence",
    "posteriors",
    "ppc",
    "invariance",
    "stability",
    "predictions",
    "diagnostics",
    "comparison",
)


def fit_defaults_notes(model: Any | None, runset: Any | None) -> list[str]:
    """The fit's note on the settings it took from its ``hyperparameter_defaults`` (``fit
    --default group_size=4``) for runs of ``runset`` that log none
    (:func:`bayes_grpo.model.prepare.default_settings_notes`), for the overview: its table gives
    the logged settings, blank there, and read "group size unknown for every run" beside a fit
    at G = 4; ``[]`` without such defaults."""
    data = getattr(model, "data", None)
    defaults = (getattr(model, "model_config", None) or {}).get("hyperparameter_defaults") or {}
    if runset is None or not defaults or getattr(data, "momentum", None) is None:
        return []
    from bayes_grpo.model.prepare import default_settings_notes

    position = {str(r): i for i, r in enumerate(getattr(data, "run_ids", []))}
    fitted = [str(r) for r in runset["run"].values if str(r) in position]
    if not fitted:
        return []
    momentum = np.asarray(data.momentum, dtype=float)[[position[r] for r in fitted]]
    return default_settings_notes(
        runset.sel(run=fitted), defaults, getattr(model, "parameterisation", "mechanistic"), momentum=momentum
    )


def build_sections(
    *,
    model: Any | None = None,
    runset: Any | None = None,
    ppc: CheckResult | Sequence[CheckResult] | None = None,
    invariance: CheckResult | Sequence[CheckResult] | None = None,
    stability: CheckResult | Sequence[CheckResult] | None = None,
    predictions: CheckResult | Sequence[CheckResult] | None = None,
    diagnostics: CheckResult | Sequence[CheckResult] | dict | None = None,
    comparison: CheckResult | Sequence[CheckResult] | None = None,
    excluded: dict[str, str] | None = None,
    posterior_warnings: Sequence[str] = (),
    absent_reasons: Mapping[str, str] | None = None,
) -> list[Section]:
    """All report sections, in :data:`SECTION_KEYS` order.

    Parameters
    ----------
    model
        A fitted ``bayes_grpo.model.GRPODynamicsModel`` (fit, convergence and posterior
        sections); its fitted run set is used for the overview when ``runset`` is None.
    runset
        The run set (data overview).
    ppc
        The posterior predictive checks of ``model`` (:func:`bayes_grpo.checks.ppc.ppc_checks`,
        optionally with :func:`bayes_grpo.checks.invariance.leave_one_g_out`). The residual
        autocorrelation check of an i.i.d. fit is shown once, in the fit section
        (:func:`bayes_grpo.checks.ppc.iid_residual_check`, whose verdict on alternating residuals
        is the one that holds for that likelihood); this section points there.
    invariance, stability, predictions, diagnostics, comparison
        Check results from :mod:`bayes_grpo.checks`, :mod:`bayes_grpo.predict` and
        :mod:`bayes_grpo.diagnostics` (predictions include forecasts).
    excluded
        ``{run id: why}`` for runs of ``runset`` left out of the fit on purpose (the demo's runs
        diagnosed unstable or collapsing): the overview gives that reason, not "not a run of the fit".
    posterior_warnings
        The warnings of loading the saved fit (``as_fitted_model``'s texts: a fit that did not
        converge, an i.i.d. fit whose residuals wander), shown at the top of the report, since
        every section computed from the fit's draws inherits them.
    absent_reasons
        ``{section key: why it is absent}`` in place of the default ("no invariance test was
        run (bayes-grpo invariance, ...)"), for a caller that knows how the section is asked
        for: :func:`report_from_posterior` names its own options (``--invariance``, ...).
    """
    reasons = dict(absent_reasons or {})
    fitted = getattr(model, "runset", None) if model is not None else None
    unfitted = None
    if runset is None:
        runset = fitted
    elif fitted is not None and runset is not fitted:
        from bayes_grpo.diagnostics._posterior import unfitted_runs

        unfitted = unfitted_runs(model, runset, [str(r) for r in runset["run"].values])
        unfitted |= {r: f"left out of the fit: {why}" for r, why in (excluded or {}).items() if r in unfitted}
    sections = [
        overview_section(
            runset, unfitted=unfitted, fitted=fitted is not None, notes=fit_defaults_notes(model, runset)
        )
    ]
    # what `predict` / `stability` / `phase-diagram` carry as posterior_warnings: before
    # everything computed from the fit, not only on stderr (an i.i.d. fit "too confident")
    sections[0].blocks[:0] = [Block("warning", f"Warning of the saved fit: {w}") for w in posterior_warnings]
    sections += model_sections.model_sections(model)
    stability_results = list(iter_results(stability))
    unconverged = ""
    convergence = next((b.content for s in sections if s.key == "convergence" for b in s.blocks if b.kind == "check"), None)
    if convergence is not None and convergence.badge_class == "fail":
        # the per-run table and the phase diagram are the fit's draws: say so there, not only
        # under Convergence (the fit section showed R^2 and zeta of an R-hat 3 fit unqualified)
        fit = next((s for s in sections if s.key == "fit"), Section("fit", ""))
        fit.intro += (
            " The fit did not converge (see Convergence): the figures below are from draws that may "
            "not represent the posterior."
        )
        if stability_results:
            unconverged = (
                " Computed from the draws of a fit that did not converge (see Convergence): "
                "its probabilities and thresholds inherit that."
            )
    fit_failed = convergence is not None and convergence.badge_class == "fail"
    sections.append(ppc_section(model, list(iter_results(ppc)), sections, reasons.get("ppc"), unconverged=fit_failed))
    sections.append(
        checks_section(
            "invariance",
            "Group-size invariance",
            list(iter_results(invariance)),
            intro="H0: within a model the mean trajectory is the same for every G and only the noise scales as D/G; "
            "H1: it differs by G. Bayes factors by two independent methods, prior sensitivity and the noise exponent alpha.",
            missing=reasons.get("invariance", "no invariance test was run (bayes-grpo invariance, or bayes_grpo.checks.invariance)."),
        )
    )
    per_setting = ""
    if any(
        r.values.get("n_observed_other_momentum", 0) and not r.values.get("other_momentum_noted", True)
        for r in stability_results
    ):
        # each per-momentum diagram repeated "N fitted run(s) at another momentum (...) are not marked"
        per_setting = (
            " One diagram per fitted LLM and momentum setting of its runs: each marks the fitted runs "
            "at its setting; those at another are on the diagram of theirs."
        )
    sections.append(
        checks_section(
            "stability",
            "Stability phase diagram",
            stability_results,
            intro="Posterior probability of instability (closed form: C_eff < 0; exact: spectral radius of the "
            "lagged heavy-ball recursion >= 1) and of the oscillatory regime over (learning rate, K_ref)."
            + per_setting
            + unconverged,
            missing=reasons.get(
                "stability",
                "a phenomenological fit has no curvature K, so the learning rate and K_ref do not enter it "
                "and it draws no phase diagram (refit with --parameterisation mechanistic)."
                if getattr(model, "parameterisation", None) == "phenomenological"
                else "no stability analysis was given (bayes-grpo phase-diagram, or bayes_grpo.checks.stability).",
            ),
        )
    )
    sections.append(
        checks_section(
            "predictions",
            "Predictions and forecasts",
            list(iter_results(predictions)),
            intro="Posterior predictive trajectories for new hyperparameters and forecasts of runs in progress.",
            missing=reasons.get("predictions", "no prediction or forecast was made (bayes-grpo predict / forecast)."),
        )
    )
    sections.append(
        checks_section(
            "diagnostics",
            "Failure-mode diagnostics",
            list(iter_results(diagnostics)),
            intro="Reward hacking (train-eval decoupling), advantage degeneracy, policy concentration and dynamical "
            "instability, per run, from the logged side quantities.",
            missing=reasons.get("diagnostics", "no diagnostics were run (bayes-grpo diagnose)."),
        )
    )
    sections.append(
        checks_section(
            "comparison",
            "Law comparison",
            list(iter_results(comparison)),
            intro="The three-phase oscillator (mechanistic and phenomenological parameterisations) against the single "
            "exponential (overdamped limit) and the logistic law: PSIS-LOO, leave-future-out and R^2 per law.",
            missing=reasons.get("comparison", "no law comparison was run (bayes-grpo compare)."),
        )
    )
    assert [s.key for s in sections] == list(SECTION_KEYS)
    return sections


#: The report's title of each posterior predictive check (the check's name otherwise).
PPC_TITLES: dict[str, str] = {
    "ppc_trajectory_bands": "Predictive-band coverage per G",
    "ppc_residual_autocorrelation": "Residual autocorrelation per G",
    "stationary_variance": "Stationary variance at the plateau",
    "leave_one_g_out": "Leave one G out",
}
PPC_INTRO = (
    f"The fitted runs against the fit's posterior predictive, per model and G: the share of logged "
    f"rewards inside the {HDI_PROB:.0%} predictive band of a new run at each run's setting (one figure "
    "per model and G), the autocorrelation of the residuals, and the variance at the plateau against "
    "the SDE's D / (2 G C K_eff)."
)


def ppc_section(
    model: Any | None,
    results: Sequence[CheckResult],
    sections: Sequence[Section],
    missing: str | None = None,
    *,
    unconverged: bool = False,
) -> Section:
    """The posterior predictive checks section (key ``"ppc"``), after the fit's own sections.

    A residual autocorrelation check that the fit section (in ``sections``) already shows is not
    repeated: an i.i.d. fit's residuals are judged there (``iid_residual_check``, which passes
    alternating residuals that ``residual_autocorrelation_check`` flags), and a line here says so.
    ``missing``: why the section is absent, in the caller's terms; ``unconverged``: the fit did
    not converge, which the intro says (the bands are its draws), as the stability section does."""
    import dataclasses

    from bayes_grpo.report.sections import absent

    title = "Posterior predictive checks"
    if not results:
        if missing is None:
            missing = (
                "no fitted posterior was given (bayes-grpo fit, then bayes-grpo report models/NAME.nc)."
                if model is None or getattr(model, "idata", None) is None
                else "no posterior predictive checks were given (ppc=bayes_grpo.checks.ppc.ppc_checks(model); "
                "bayes-grpo report runs them)."
            )
        return absent("ppc", title, missing, PPC_INTRO)
    in_fit = any(
        b.kind == "check" and b.content.name == "ppc_residual_autocorrelation"
        for s in sections
        if s.key == "fit"
        for b in s.blocks
    )
    # the band figures' keys ("tiny-gpt2 G=16 bands", the file names of `ppc --figures`) read
    # as captions that say what is drawn
    band = (
        f": {HDI_PROB:.0%} posterior predictive band of each run's logged reward (shaded), the posterior "
        "median of its mean trajectory (line) and its logged rewards (dots), a colour per run."
    )
    intro = PPC_INTRO + (
        " Computed from the draws of a fit that did not converge (see Convergence): its bands inherit that."
        if unconverged
        else ""
    )
    section = Section("ppc", title, intro=intro)
    for r in results:
        if in_fit and r.name == "ppc_residual_autocorrelation":
            section.text(
                "Residual autocorrelation: under Fit per run above, the check of the i.i.d. "
                "likelihood's independent residuals."
            )
            continue
        if "title" not in r.values and r.name in PPC_TITLES:
            r = dataclasses.replace(r, values=r.values | {"title": PPC_TITLES[r.name]})
        if r.name == "ppc_trajectory_bands":
            r = dataclasses.replace(r, figures={k.removesuffix(" bands") + band: f for k, f in r.figures.items()})
        section.check(r)
    return section


def render_html(sections: Sequence[Section], *, title: str = "bayes_grpo report", subtitle: str = "") -> str:
    """Render sections with the package's Jinja2 template (autoescaped)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bayes_grpo.report", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    template = env.get_template("report.html")
    return template.render(
        title=title,
        subtitle=subtitle,
        sections=list(sections),
        version=__version__,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        hdi_prob=HDI_PROB,
    )


def section_verdicts(sections: Sequence[Section]) -> list[dict[str, Any]]:
    """What each section of the report concludes, as its HTML shows it: ``key``, ``title``,
    ``available`` (``absent_reason`` when not), and per check its ``name``, ``title``,
    ``verdict`` (the badge: "pass", "flagged", "detected", "not assessable", ...), ``passed``
    (True, False or None, as the badge's colour) and ``summary``. ``report --json`` prints it;
    the checks' tables and values are those of the verbs that make them (``diagnose --json``,
    ``phase-diagram --json``, ...)."""
    passed = {"pass": True, "fail": False, "na": None}
    out = []
    for s in sections:
        entry: dict[str, Any] = {"key": s.key, "title": s.title, "available": s.available}
        if not s.available:
            entry["absent_reason"] = s.absent_reason
        entry["checks"] = [
            {
                "name": c.name,
                "title": c.title,
                "verdict": c.badge,
                "passed": passed.get(c.badge_class),
                "summary": c.summary,
            }
            for c in (b.content for b in s.blocks if b.kind == "check")
        ]
        out.append(entry)
    return out


def overview_notes(sections: Sequence[Section]) -> dict[str, Any]:
    """What the report's overview warns of its run set, as data
    (:func:`bayes_grpo.report.sections.run_set_notes`: ``evaluation_reward``, ``ingest``,
    ``rejected``, ``runs``), the dict its warnings and table of notes on each run were rendered
    from; its empty form for a report without a run set. ``report --json`` prints it as
    ``runset_notes``."""
    overview = next((s for s in sections if s.key == "overview"), None)
    notes = overview.runset_notes if overview is not None else {}
    return dict(notes) if notes else run_set_notes(None)


def write_report(
    path: str | os.PathLike,
    *,
    title: str = "bayes_grpo report",
    subtitle: str = "",
    overwrite: bool = False,
    verdicts: list[dict[str, Any]] | None = None,
    runset_notes: dict[str, Any] | None = None,
    **results: Any,
) -> Path:
    """Build every section from ``results`` (see :func:`build_sections`) and write the HTML atomically.

    An existing ``path`` is replaced only with ``overwrite`` (``FileExistsError`` otherwise);
    a ``path`` not named ``.html`` / ``.htm`` is refused (``ValueError``), as ``bayes-grpo report``
    refuses it.
    ``verdicts``, a list, receives :func:`section_verdicts` of the sections written;
    ``runset_notes``, a dict, :func:`overview_notes` of them.
    """
    check_suffix(path, "path", HTML_SUFFIXES, "an HTML page")  # before the sections are built
    sections = build_sections(**results)
    written = write_text_atomic(path, render_html(sections, title=title, subtitle=subtitle), overwrite=overwrite)
    if verdicts is not None:
        verdicts.extend(section_verdicts(sections))
    if runset_notes is not None:
        runset_notes.update(overview_notes(sections))
    return written


def ppc_results(model: Any, *, seed: int = 0) -> list[CheckResult]:
    """The report's posterior predictive checks of a fitted model's own runs
    (:func:`bayes_grpo.checks.ppc.ppc_checks`); a fit they cannot be computed for (a run lacking
    a setting its form needs) gives one not-assessable result naming why, not a failed report."""
    from bayes_grpo.checks.ppc import ppc_checks

    checked_seed(seed)  # outside the try: seed=-1 made a "Not assessable: expected non-negative integer" section
    try:
        return ppc_checks(model, seed=seed)
    except ValueError as exc:
        return [CheckResult("ppc", None, f"Not assessable: {exc}", values={"title": "Posterior predictive checks"})]


def report_from_posterior(
    posterior: str | os.PathLike,
    output: str | os.PathLike,
    *,
    runset: Any | None = None,
    diagnose: bool = True,
    stability: bool = True,
    ppc: bool = True,
    invariance: bool = False,
    compare: bool = False,
    predictions: Sequence[str | os.PathLike] = (),
    title: str | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    seed: int = 0,
    overwrite: bool = False,
    posterior_warnings: list[str] | None = None,
    verdicts: list[dict[str, Any]] | None = None,
    runset_notes: dict[str, Any] | None = None,
) -> Path:
    """Write the report of a saved posterior, running the cheap stages on the way.

    Parameters
    ----------
    posterior
        A posterior saved by ``GRPODynamicsModel.save`` (holds its run set).
    output
        The HTML file to write, named ``.html`` or ``.htm`` (``ValueError`` otherwise, before
        any work, as ``bayes-grpo report -o`` refuses it).
    runset
        A run set for the overview and diagnostics (default: the fitted one).
    diagnose, stability, ppc
        Run the diagnostics, the stability phase diagram and the posterior predictive checks
        of the fitted runs (:func:`ppc_results`) (fast: a second or two for ``models/tiny.nc``).
    invariance, compare
        Run the G-invariance Bayes factors and the law comparison (slower: they sample).
    predictions
        Prediction / forecast netCDF files written by ``bayes-grpo predict`` / ``forecast``.
    draws, tune, chains, seed
        NUTS settings of the sampled stages. A setting left None is the fit's own (its
        ``sampler_config``) for the invariance test and :func:`compare_laws`' default for the
        law comparison. ``seed`` also seeds the posterior predictive draws of ``ppc``.
    overwrite
        Replace an existing ``output`` (``FileExistsError`` otherwise, also when the file
        appears while the stages run).
    posterior_warnings
        A list that receives the saved fit's own warnings (did not converge, an i.i.d. fit too
        confident: :func:`bayes_grpo.model.core.as_fitted_model`), warned when it is loaded and
        shown at the top of the overview; ``report --json`` gives them as ``posterior_warnings``,
        as ``predict`` / ``stability`` / ``phase-diagram`` / ``forecast --prior`` do.
    verdicts
        A list that receives what each section concludes (:func:`section_verdicts`), which
        ``report --json`` gives as ``sections``.
    runset_notes
        A dict that receives what the overview warns of the run set (:func:`overview_notes`:
        the runs whose reward is an evaluation metric, the ingest's notes, the sources not
        ingested, the notes on each run), which ``report --json`` gives as ``runset_notes``.
    """
    from bayes_grpo.model.core import as_fitted_model
    from bayes_grpo.predict.predict import load_prediction

    # an input is never replaced, overwrite or not (as `bayes-grpo report` refuses it): the
    # report written over the posterior it was made from destroyed the fit
    out = Path(output).expanduser().resolve()
    for name, source in [("posterior", posterior), *(("prediction", p) for p in predictions)]:
        if Path(source).expanduser().resolve() == out:
            raise FileExistsError(f"{output}: is the {name} file; writing the report there would replace it (overwrite=True does not)")
    refuse_non_regular_file(output)  # a folder, overwrite or not: before the work, not after
    if not overwrite and Path(output).exists():  # before minutes of sampling, not after
        raise FileExistsError(f"{output}: already exists; refusing to overwrite it (overwrite=True replaces it)")
    # "r.txt" got an HTML page, which `bayes-grpo report -o r.txt` refuses (checked in this order)
    check_suffix(output, "output", HTML_SUFFIXES, "an HTML page")
    # before the fit is loaded: seed=-1 made the ppc section "Not assessable: expected non-negative
    # integer" (NumPy's words), seed=1.5 failed there in NumPy, draws=1.5 was sampled as 1 draw
    checked_seed(seed, generator=False)
    for name, value, least in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1)):
        if value is not None:
            checked_count(value, name, least)
    if runset is not None:
        from bayes_grpo.runset import require_runs

        # a run set of no run died in a KeyError traceback in the overview's table of runs
        require_runs(runset, "report on")
    # read first: a wrong file must fail before minutes of sampling, not after
    loaded = [(Path(p).name, load_prediction(p)) for p in predictions]
    # as predict / stability / phase-diagram load a fit: its warnings (did not converge, an i.i.d.
    # fit too confident) on stderr and in the report, since everything below is from its draws
    model, load_notes = as_fitted_model(posterior)
    if posterior_warnings is not None:
        posterior_warnings.extend(load_notes)
    runs = runset if runset is not None else model.runset
    results: dict[str, Any] = {"model": model, "runset": runs, "posterior_warnings": load_notes}
    given = {"draws": draws, "tune": tune, "chains": chains}
    nuts = {k: int(v) for k, v in given.items() if v is not None}
    if diagnose:
        from bayes_grpo.diagnostics import diagnose as run_diagnostics

        results["diagnostics"] = run_diagnostics(runs, posterior=model)
    if ppc:
        results["ppc"] = ppc_results(model, seed=seed)
    if stability:
        from bayes_grpo.checks.stability import phase_diagram

        data = model.data
        # one diagram per fitted LLM and momentum setting of its runs: each LLM has its own
        # curvature (a population-level one needs a new LLM's size when the fit regresses K on
        # model size), and a diagram marks the runs at its momentum only (one at the median of
        # 0.9 and 0.5 marked none, and an SGD run beside Adam ones was in no diagram)
        settings = dict.fromkeys(
            (int(m), float(mu), str(convention))
            for m, mu, convention in zip(data.model_idx, data.momentum, data.momentum_convention)
        )
        # every setting has its diagram, so the runs at another setting than a diagram's are on
        # another one: said once in the section's intro, not under each diagram
        results["stability"] = [
            phase_diagram(
                model, momentum=mu, momentum_convention=convention, model=data.models[m], note_other_momenta=False
            )
            for m, mu, convention in sorted(settings)
        ] if model.parameterisation == "mechanistic" else None
    untestable = None  # why the G-invariance test could not be made on these runs
    if invariance:
        from bayes_grpo.checks.invariance import invariance_check
        from bayes_grpo.runset import RunSetError

        # the fit's priors, hyperparameter defaults (`fit --default momentum=0.9`), likelihood
        # and reward bounds (H0 and H1 of a fit with bounds 0 1 put plateaus above 1 without them)
        try:
            results["invariance"] = invariance_check(model.runset, **model.refit_settings(**nuts), random_seed=seed)
        except RunSetError as exc:
            # runs whose G groups also differ in a setting the fit's law does not follow are
            # refused by the test (before it samples): the section says why, the report stands
            # (the refusal ended the whole report, every section made before it lost)
            untestable = f"not testable on the fit's runs: {exc}"
            warnings.warn(f"{posterior}: the G-invariance section is left out: {untestable}", UserWarning, stacklevel=2)
    if compare:
        from bayes_grpo.predict.compare import compare_laws

        results["comparison"] = compare_laws(
            model.runset,
            random_seed=seed,
            hyperparameter_defaults=model.model_config.get("hyperparameter_defaults"),  # fit --default
            reward_bounds=model.reward_bounds,  # fit --reward-bounds: the laws' plateaus inside them too
            **nuts,
        ).to_check_result()
    if loaded:
        from bayes_grpo.predict.result import prediction_result

        results["predictions"] = [prediction_result(ds, title=name) for name, ds in loaded]
    # why a section is absent, in this function's (and `bayes-grpo report`'s) terms: the
    # defaults sent the reader to `bayes-grpo invariance` / `compare`, whose results the
    # report cannot take, while `report --invariance` / `--compare` runs them
    results["absent_reasons"] = {
        key: why
        for key, why, asked in (
            ("invariance", "not asked: report --invariance (invariance=True) runs the G-invariance "
             "Bayes factors; it samples, so it is off by default.", invariance),
            ("comparison", "not asked: report --compare (compare=True) runs the law comparison; it "
             "samples, so it is off by default.", compare),
            ("diagnostics", "left out by report --no-diagnose (diagnose=False).", diagnose),
            ("stability", "left out by report --no-stability (stability=False).", stability),
            ("ppc", "left out by report --no-ppc (ppc=False).", ppc),
            ("predictions", "none given: report --prediction p.nc (predictions=[...]) adds a prediction "
             "or forecast saved by bayes-grpo predict / forecast -o p.nc.", bool(loaded)),
        )
        if not asked
    }  # fmt: skip
    if untestable:
        results["absent_reasons"]["invariance"] = untestable
    return write_report(
        output,
        title=title or f"bayes_grpo report: {Path(posterior).name}",
        subtitle=str(posterior),
        overwrite=overwrite,
        verdicts=verdicts,
        runset_notes=runset_notes,
        **results,
    )
