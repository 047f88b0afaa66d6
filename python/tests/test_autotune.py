"""Tests of the Python package (pip install ./[plot] pytest; pytest python/tests), on the
installed package: the device tests run on the first device (OpenCL on PoCL in CI) and are
skipped when there is none."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autotune

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "autotune.h"
SPACE = ROOT / "benchmarks" / "spaces" / "pocl-gemm-small-48x40x33.json.gz"
SHAPE = (33, 17, 29)


@pytest.fixture
def ctx(tmp_path):
    try:
        c = autotune.Context(db=tmp_path / "db")
    except autotune.Error as e:
        if e.status in ("AT_ERR_NO_BACKEND", "AT_ERR_NO_DEVICE"):
            pytest.skip(f"no device: {e}")
        raise
    with c:
        yield c


@pytest.fixture
def tuned(ctx):
    kernel, report = autotune.gemm(*SHAPE, budget=3, strategy="random", seed=5, ctx=ctx)
    return ctx, kernel, report


def operands(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]


# ---- without a device ------------------------------------------------------------------------


def test_version_is_the_headers():
    m = re.search(r'#define AT_VERSION_STRING "([^"]+)"', HEADER.read_text())
    assert autotune.__version__ == m.group(1)


def test_status_names_are_the_headers():
    enum = re.search(r"typedef enum at_status \{(.*?)\} at_status;", HEADER.read_text(), re.S)
    header = {int(v): n for n, v in re.findall(r"(AT_\w+) = (-?\d+)", enum.group(1))}
    assert autotune._lib.STATUS_NAMES == header


def test_budget_reads_as_the_command():
    assert autotune._budget(None) == (0, 0.0)
    assert autotune._budget(3) == (3, 0.0)
    assert autotune._budget("40") == (40, 0.0)
    assert autotune._budget("60s") == (0, 60.0)
    assert autotune._budget("1.5s") == (0, 1.5)
    for bad in (0, "0", "1.5", "s", "10m", "-3", True):
        with pytest.raises(ValueError):
            autotune._budget(bad)


def test_invalid_problem_raises_the_status():
    with pytest.raises(autotune.Error) as e:
        autotune.gemm(0, 5, ctx=object())  # the problem is refused before the context is used
    assert e.value.status == "AT_ERR_INVALID_ARG"
    assert e.value.code == -1
    assert "m" in e.value.detail


def test_parse_record():
    r = autotune.db.parse_record(
        r'v2 status=ok median_us=3.5 reps=50 hash=0123456789012345 reason="a \"q\"\n\x01"'
    )
    assert r == {"version": 2, "status": "ok", "median_us": 3.5, "reps": 50,
                 "hash": "0123456789012345", "reason": 'a "q"\n\x01'}
    with pytest.raises(ValueError):
        autotune.db.parse_record("status=ok")


def test_replay_of_a_recorded_space():
    r = autotune.replay(SPACE, strategy="exhaustive")
    assert r.format == "kerneltuner" and r.objective == "time"
    assert r.evaluated == r.space == 144
    assert r.best == r.optimum and r.best_config == r.optimum_config
    evals = [e for e, _ in r.trajectory]
    best = [b for _, b in r.trajectory]
    assert evals == sorted(evals) and best == sorted(best, reverse=True) and best[-1] == r.best


def test_replay_starts_warm_from_a_related_recording(tmp_path):
    # Kernel Tuner caches of one kernel on two GPUs; the other GPU's best (64,2) is the best
    # measured first. A recording of other parameters is refused with the reason.
    cache = {"16,1": 3.0, "16,2": 2.0, "32,1": "RuntimeFailedConfig", "32,2": 1.5,
             "64,1": "InvalidConfig", "64,2": 4.0}

    def recording(name, device, times, params=("bx", "t")):
        entries = {k: {params[0]: int(k.split(",")[0]), params[1]: int(k.split(",")[1]),
                       "time": t} for k, t in times.items()}
        path = tmp_path / name
        path.write_text(json.dumps({
            "device_name": device, "kernel_name": "k", "tune_params_keys": list(params),
            "tune_params": {params[0]: [16, 32, 64], params[1]: [1, 2]}, "objective": "time",
            "cache": entries}))
        return path

    target = recording("target.json", "Test GPU", cache)
    other = recording("other.json", "Other GPU", dict(cache, **{"64,2": 0.5}))
    alien = recording("alien.json", "Other GPU", cache, params=("bx", "u"))
    r = autotune.replay(target, transfer=[other, alien], seed=2)
    assert r.transfer[0] == {"file": str(other), "configs": 4, "pairs": 4, "used": True,
                             "weight": r.transfer[0]["weight"]}
    assert not r.transfer[1]["used"] and "parameters" in r.transfer[1]["reason"]
    # Its three best first, then the probe's moves around them: the two configs left.
    assert r.first_picks_from_sources == 3 and r.probe_picks == 2 and r.trajectory[0] == (1, 4.0)
    off = autotune.replay(target, transfer=[other], seed=2, no_transfer=True)
    assert not off.transfer[0]["used"] and off.first_picks_from_sources == off.probe_picks == 0
    assert autotune.replay(target).transfer == []


def test_plot_search_draws_the_trajectory():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    r = autotune.replay(SPACE, strategy="random", budget=40, seed=3)
    fig = autotune.plot.search(SPACE, strategy="random", budget=40, seed=3)
    assert isinstance(fig, Figure)
    search, optimum = fig.axes[0].get_lines()
    assert list(search.get_xdata()) == [e for e, _ in r.trajectory] + [40]
    assert search.get_ydata()[-1] == r.best
    assert optimum.get_ydata()[0] == r.optimum


def test_command_is_installed():
    exe = Path(sys.executable).with_name("autotune")
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"autotune {autotune.__version__} ")


# ---- on a device ---------------------------------------------------------------------------


def test_tune_then_run_on_numpy(tuned):
    ctx, kernel, report = tuned
    assert report.evaluated == 3 and report.measured == 3 and not report.cache_hit
    assert report.best_config == kernel.config and report.best_time_us > 0
    assert report.template_name == kernel.template
    # an evaluation budget: no seconds budget, no proxy, the struct read past its old end
    assert report.budget_s == 0 and report.overrun_s == 0 and report.proxy_problem == ""
    assert report.estimate_s > 0
    m, n, k = SHAPE
    a, b = operands((m, k), (k, n))
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        kernel(b, a)


def test_tuning_again_is_a_cache_hit(tuned):
    ctx, kernel, report = tuned
    _, again = autotune.gemm(*SHAPE, budget=3, strategy="random", seed=5, ctx=ctx)
    assert again.cache_hit and again.measured == 0 and again.best_config == report.best_config


def test_a_neighbouring_shape_starts_warm(tuned):
    ctx = tuned[0]
    _, near = autotune.gemm(SHAPE[0] + 4, *SHAPE[1:], budget=3, strategy="random", seed=5,
                            ctx=ctx)
    assert len(near.transfer) == 1
    src = near.transfer[0]
    assert src["source"].startswith("gemm/f32/nn/33x17x29 on ") and 1 <= src["configs"] <= 3
    assert near.first_picks_from_sources == min(3, src["configs"]) and near.probe_picks == 0
    _, cold = autotune.gemm(SHAPE[0] + 8, *SHAPE[1:], budget=3, strategy="random", seed=5,
                            ctx=ctx, no_transfer=True)
    assert cold.transfer == [] and cold.first_picks_from_sources == 0


def test_get_answers_from_the_database(tuned):
    ctx, _, report = tuned
    kernel, info = autotune.get(*SHAPE, ctx=ctx)
    assert info["source"] == "exact"
    assert info["database"] == ctx.database and Path(ctx.database).name == "db"
    assert info["problem_key"] == "gemm/f32/nn/33x17x29"
    assert info["config"] == kernel.config == report.best_config
    assert info["time_us"] == report.best_time_us


def test_shipped_databases_are_the_packages(ctx, tmp_path, monkeypatch):
    # The library finds the bundles installed next to it in the package (CMakeLists.txt).
    shipped = Path(autotune.__file__).parent / "share" / "autotune" / "db"
    bundles = sorted(str(p) for p in shipped.glob("*.jsonl.gz"))
    assert bundles, f"no bundle in {shipped}"
    monkeypatch.delenv("AUTOTUNE_SHIPPED_DB", raising=False)
    monkeypatch.delenv("AUTOTUNE_DB_PATH", raising=False)
    with autotune.Context(db=tmp_path / "other") as c:
        assert c.databases == [str(tmp_path / "other")] + bundles


def test_get_without_an_entry_is_not_found(ctx):
    with pytest.raises(autotune.Error) as e:
        autotune.get(31, 7, 5, ctx=ctx, no_fallback=True)
    assert e.value.status == "AT_ERR_NOT_FOUND" and "31x7x5" in str(e.value)


def test_transposed_operands_and_beta(ctx):
    m, n, k = 20, 12, 7
    kernel, _ = autotune.get(m, n, k, layout="tt", alpha=0.5, beta=2.0, ctx=ctx)
    at, bt, c = operands((k, m), (n, k), (m, n), seed=1)
    want = 0.5 * (at.T @ bt.T) + 2.0 * c
    np.testing.assert_allclose(kernel(at, bt, c), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        kernel(at, bt)  # beta is not 0: C is an input


def test_db_entries_and_stats(tuned):
    ctx, _, report = tuned
    best = autotune.db.entries(ctx.database)
    assert len(best) == 1
    e = best[0]
    assert e["problem"] == "gemm/f32/nn/33x17x29" and e["device"] == ctx.device_key
    assert e["config"] == report.best_config and e["time_us"] == report.best_time_us
    results = autotune.db.entries(ctx.database, table="results", prefix="gemm/f32/nn/33x17x29|")
    assert len(results) == 3 and all(r["status"] == "ok" for r in results)
    assert report.best_config in {r["config"] for r in results}
    assert autotune.db.entries(ctx.database, prefix="gemm/f32/tn/") == []
    s = autotune.db.stats(ctx.database)
    assert s["total"] == {"results_ok": 3, "results_failed": 0, "best": 1}
    assert list(s["ops"]) == ["gemm"]


def test_plot_search_of_a_database(tuned):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    ctx, _, report = tuned
    # The database holds three measured configs: an exhaustive replay finds the best of them.
    r = autotune.replay(ctx.database, strategy="exhaustive")
    assert r.format == "autotune" and r.evaluated == 3 and r.best_config == report.best_config
    fig = autotune.plot.search(r)
    assert fig.axes[0].get_lines()[0].get_ydata()[-1] == r.best


def test_db_missing_raises(tmp_path):
    with pytest.raises(autotune.Error) as e:
        autotune.db.entries(tmp_path / "none")
    assert e.value.status.startswith("AT_ERR_")
    assert os.fspath(tmp_path / "none") in str(e.value)
