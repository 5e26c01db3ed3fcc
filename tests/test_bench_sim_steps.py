"""The benchmarks' simulated run sets have the size their notes and the README quote.

``simulate_sde_runset(n_steps=T)`` logs steps ``0 .. T - 1`` (T points); before it logged
``0 .. T`` (T + 1), and a benchmark that asked for ``T - 1`` to get T points then got one
point short of what its figures are quoted for.
"""

from __future__ import annotations


def test_bench_fit_data_is_12_runs_of_1000_logged_steps(load_script):
    # README ('12 runs x 1000 steps') and BENCH_FIT_NOTES.md quote the fit on this data; with
    # n_steps=999 it had 999 logged steps (0 .. 998) once n_steps counted logged steps
    ds = load_script("benchmarks/bench_fit.py").make_data()
    assert ds.sizes["run"] == 12
    assert ds.sizes["step"] == 1000
    assert list(ds["step"].values[[0, -1]]) == [0, 999]
    assert bool(ds["reward"].notnull().all())
