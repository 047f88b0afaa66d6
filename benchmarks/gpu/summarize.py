#!/usr/bin/env python3
"""Summarize a benchmarks/gpu/run.sh output directory (stdlib only).

Usage: summarize.py OUTDIR   -> writes OUTDIR/summary.json and OUTDIR/summary.txt

Reads OUTDIR/steps/*.env (what ran, exit codes, times, commands), the autotune JSON of every
correctness and tuning run, OUTDIR/tune/*.db-show.log (the measurements a stopped tuning run
saved), OUTDIR/cublas.jsonl (torch_bench.py) and OUTDIR/compile.json. Anything missing is
marked ("not run", "skipped", "error: ..."); it never fails on a missing or broken piece.

ratio = autotune TFLOP/s / cuBLAS TFLOP/s for the same dtype and shape (1.0 = on par, above 1
autotune is faster). TFLOP/s = 2*m*n*k / time.

Attention: OUTDIR/steps/attn_*.env and tune/attn_*.json (autotune attention) against
OUTDIR/sdpa.jsonl (torch_bench.py --attention: SDPA, flash backend); ratio = SDPA's median time
/ autotune's best time (above 1 autotune is faster); TFLOP/s over the visible score pairs,
4 * head_dim FLOPs each.
"""
import glob
import json
import math
import os
import re
import sys

TOL = {"f32": 1e-4, "f16": 1e-2, "bf16": 5e-2}  # informational bounds on max_rel_error


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except (OSError, TypeError):
        return default


def read_env(path):
    d = {}
    for line in read(path).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            d[k] = v
    return d


def last_json_object(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
                if isinstance(obj, dict):
                    return obj
            except ValueError:
                pass
    return None


def num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def wall(env):
    t0, t1 = num(env.get("t0")), num(env.get("t1"))
    return round(t1 - t0, 2) if t0 is not None and t1 is not None else None


def shape_of(s):
    try:
        m, n, k = (int(x) for x in s.split("x"))
        return m, n, k
    except (ValueError, AttributeError):
        return None


def last_line(path):
    lines = [l for l in read(path).strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def autotune_run(outdir, env):
    """Common reading of one `autotune gemm --json` run (correctness or tuning)."""
    r = {"status": env.get("status", "not run")}
    if env.get("note"):
        r["note"] = env["note"]
    if r["status"] != "ran":
        return r, None
    rc = int(env.get("rc", "-1")) if re.fullmatch(r"-?\d+", env.get("rc", "")) else -1
    r.update(rc=rc, wall_s=wall(env), cmd=env.get("cmd"), timeout_s=num(env.get("timeout")))
    j = last_json_object(read(os.path.join(outdir, env.get("stdout", ""))))
    err = last_line(os.path.join(outdir, env.get("stderr", "")))
    if rc == 0 and j and isinstance(j.get("best"), dict):
        r["status"] = "ok"
        return r, j
    if rc in (124, 137):
        r["status"] = "timeout"
    elif rc == 2 and "not supported" in err:
        r["status"] = "unsupported"
    else:
        r["status"] = "error"
    r["error"] = "exit %d%s" % (rc, (": " + err) if err else "")
    return r, j


# ---- correctness ------------------------------------------------------------------------

def correctness(outdir):
    cases = []
    for path in sorted(glob.glob(os.path.join(outdir, "steps", "correct_*.env"))):
        env = read_env(path)
        r, j = autotune_run(outdir, env)
        c = {"dtype": env.get("dtype"), "layout": env.get("layout"), "shape": env.get("shape")}
        c.update(r)
        if j and isinstance(j.get("best"), dict):
            b, cand = j["best"], j.get("candidates") or {}
            err = num(b.get("max_rel_error"))
            c.update(max_rel_error=err, config=b.get("config"), evaluated=cand.get("evaluated"),
                     measured=cand.get("measured"), failed=cand.get("failed"),
                     space=cand.get("space"), backend=j.get("backend"), device=j.get("device"))
            # the tuner compares every candidate with its reference before timing it; a
            # max_rel_error in the JSON is the proof that the comparison ran
            if err is None or not cand.get("measured"):
                c["status"] = "unchecked"
            elif err > TOL.get(c["dtype"], 1e-2):
                c["status"] = "large_error"
        cases.append(c)
    order = {"1x1x1": 0, "7x5x3": 1, "127x129x65": 2, "1000x999x77": 3, "16x8192x128": 4}
    cases.sort(key=lambda c: (order.get(c.get("shape"), 9), c.get("shape") or "",
                              c.get("dtype") or "", c.get("layout") or ""))
    counts = {}
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    ct_env = read_env(os.path.join(outdir, "steps", "ctest.env"))
    ct = {"status": ct_env.get("status", "not run"), "note": ct_env.get("note")}
    if ct["status"] == "ran":
        ct.update(rc=ct_env.get("rc"), tests=ct_env.get("tests"), cmd=ct_env.get("cmd"),
                  wall_s=wall(ct_env), log="ctest.log")
        m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)",
                      read(os.path.join(outdir, "ctest.log")))
        if m:
            ct.update(failed=int(m.group(2)), total=int(m.group(3)))
        ct["status"] = "ok" if ct_env.get("rc") == "0" else "failed"
    by_dtype = {}
    for c in cases:
        d = by_dtype.setdefault(c.get("dtype"), {})
        d[c["status"]] = d.get(c["status"], 0) + 1
    return {"ctest": ct, "counts": counts, "by_dtype": by_dtype, "cases": cases}


# ---- tuning ------------------------------------------------------------------------------

def parse_db_show(text):
    """Measurements an interrupted run saved: result lines of `autotune db show`."""
    best, n_ok, n = None, 0, 0
    cur = None
    for line in text.splitlines():
        if line.startswith("result "):
            cur = line.split("|")[-1].strip()
            continue
        if cur and line.startswith("    ") and "status=" in line:
            n += 1
            kv = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
            if kv.get("status") != "ok":
                continue
            n_ok += 1
            med = num(kv.get("median_us"))
            full = kv.get("early_stop", "0") == "0"
            if med is not None and full and (best is None or med < best[0]):
                best = (med, cur, num(kv.get("err")))
            cur = None
    return n, n_ok, best


def tuning(outdir, cublas):
    rows = {}
    for path in sorted(glob.glob(os.path.join(outdir, "steps", "tune_*.env")),
                       key=os.path.getmtime):
        env = read_env(path)
        d, s = env.get("dtype"), env.get("shape")
        shp = shape_of(s)
        r, j = autotune_run(outdir, env)
        at = dict(r)
        flop = 2.0 * shp[0] * shp[1] * shp[2] if shp else None
        if j and isinstance(j.get("best"), dict):
            b, cand = j["best"], j.get("candidates") or {}
            t_us = num(b.get("time_us"))
            at.update(time_us=t_us, gflops=num(b.get("gflops")),
                      tflops=(num(b.get("gflops")) or 0) / 1e3 or None,
                      tflops_from_time=(flop / (t_us * 1e6)) if flop and t_us else None,
                      config=b.get("config"), max_rel_error=num(b.get("max_rel_error")),
                      evaluated=cand.get("evaluated"), measured=cand.get("measured"),
                      failed=cand.get("failed"), space=cand.get("space"),
                      cache=j.get("cache"), tuning_seconds=num(j.get("seconds")),
                      device=j.get("device"), backend=j.get("backend"))
            if j.get("cache") == "hit":
                at["warning"] = "cache hit: not a tuning time"
        elif r["status"] in ("timeout", "error") and env.get("dbshow"):
            n, n_ok, best = parse_db_show(read(os.path.join(outdir, env["dbshow"])))
            at.update(saved_measurements=n, saved_ok=n_ok)
            if best and flop:
                at.update(status="partial", time_us=best[0], config=best[1], max_rel_error=best[2],
                          tflops=flop / (best[0] * 1e6), gflops=flop / (best[0] * 1e3),
                          note="stopped (%s); best of the %d fully timed ok measurements it "
                               "saved" % (r.get("error", r["status"]), n_ok))
        key = "%s/%s" % (d, s)
        cb = cublas.get(key, {"status": "not run"})
        ratio = None
        if at.get("tflops") and cb.get("tflops"):
            ratio = at["tflops"] / cb["tflops"]
        rows[key] = {"dtype": d, "shape": s, "m": shp[0] if shp else None,
                     "n": shp[1] if shp else None, "k": shp[2] if shp else None,
                     "autotune": at, "cublas": cb, "ratio_autotune_to_cublas": ratio}
    # cuBLAS cases without a tuning row (tuning skipped in no-GPU mode, or SHAPES differ)
    for key, cb in cublas.items():
        if key not in rows:
            d, s = key.split("/", 1)
            shp = shape_of(s)
            rows[key] = {"dtype": d, "shape": s, "m": shp[0] if shp else None,
                         "n": shp[1] if shp else None, "k": shp[2] if shp else None,
                         "autotune": {"status": "not run"}, "cublas": cb,
                         "ratio_autotune_to_cublas": None}
    return rows


def read_cublas(outdir):
    env = read_env(os.path.join(outdir, "steps", "cublas.env"))
    info = {"status": env.get("status", "not run"), "note": env.get("note"),
            "cmd": env.get("cmd"), "rc": env.get("rc"), "wall_s": wall(env)}
    cases = {}
    for line in read(os.path.join(outdir, "cublas.jsonl")).splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if not isinstance(o, dict):
            continue
        if o.get("kind") == "env":
            info["env"] = o
        elif o.get("kind") == "case":
            key = "%s/%dx%dx%d" % (o.get("dtype"), o.get("m", 0), o.get("n", 0), o.get("k", 0))
            c = {k: o.get(k) for k in ("status", "tflops", "gflops", "median_ms", "min_ms",
                                       "max_ms", "stdev_ms", "reps", "probe_rel_error", "error")
                 if o.get(k) is not None}
            cases[key] = c
    if info["status"] == "ran":
        e = info.get("env") or {}
        if e.get("status") not in (None, "ok"):
            info["status"] = "error: %s" % e.get("status")
        elif info["rc"] not in ("0", None):
            info["status"] = "error: exit %s" % info["rc"]
        else:
            info["status"] = "ok"
    return info, cases


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


# ---- attention ----------------------------------------------------------------------------

def attn_flop(b, h, s, s2, d, causal):
    return 4.0 * d * b * h * (s * s2 - s * (s - 1) // 2 if causal else s * s2)


def attention(outdir):
    """The SDPA cases and the autotune attention runs, joined on the spec B,H,G,S,S2,D,C."""
    env = read_env(os.path.join(outdir, "steps", "sdpa.env"))
    info = {"status": env.get("status", "not run"), "note": env.get("note"),
            "cmd": env.get("cmd"), "rc": env.get("rc"), "wall_s": wall(env)}
    sdpa = {}
    for line in read(os.path.join(outdir, "sdpa.jsonl")).splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if not isinstance(o, dict):
            continue
        if o.get("kind") == "env":
            info["env"] = o
        elif o.get("kind") == "attention":
            spec = "%d,%d,%d,%d,%d,%d,%d" % (o["batch"], o["heads"], o["kv_heads"], o["seq"],
                                             o["seq_kv"], o["head_dim"], int(o["causal"]))
            sdpa[spec] = {k: o.get(k) for k in (
                "status", "backend", "gqa", "median_ms", "min_ms", "max_ms", "reps", "tflops",
                "probe_rel_error", "error", "refused") if o.get(k) is not None}
    if info["status"] == "ran":
        e = info.get("env") or {}
        if e.get("status") not in (None, "ok"):
            info["status"] = "error: %s" % e.get("status")
        elif info["rc"] not in ("0", None):
            info["status"] = "error: exit %s" % info["rc"]
        else:
            info["status"] = "ok"
    rows = {}
    for path in sorted(glob.glob(os.path.join(outdir, "steps", "attn_*.env")),
                       key=os.path.getmtime):
        env = read_env(path)
        spec = env.get("spec", "")
        try:
            b, h, g, s, s2, d, c = (int(x) for x in spec.split(","))
        except ValueError:
            continue
        flop = attn_flop(b, h, s, s2, d, c)
        r, j = autotune_run(outdir, env)
        at = dict(r)
        if j and isinstance(j.get("best"), dict):
            bst, cand = j["best"], j.get("candidates") or {}
            t_us = num(bst.get("time_us"))
            at.update(time_us=t_us, tflops=flop / (t_us * 1e6) if t_us else None,
                      config=bst.get("config"), max_rel_error=num(bst.get("max_rel_error")),
                      evaluated=cand.get("evaluated"), failed=cand.get("failed"),
                      space=cand.get("space"), cache=j.get("cache"), template=j.get("template"),
                      tuning_seconds=num(j.get("seconds")))
            if r["status"] != "ok":  # stopped, but it printed what it had measured
                at.update(status="partial", note="stopped (%s); the best of its %s evaluations"
                          % (r.get("error", r["status"]), cand.get("evaluated")))
        elif r["status"] in ("timeout", "error") and env.get("dbshow"):
            n, n_ok, best = parse_db_show(read(os.path.join(outdir, env["dbshow"])))
            at.update(saved_measurements=n, saved_ok=n_ok)
            if best:
                at.update(status="partial", time_us=best[0], config=best[1],
                          max_rel_error=best[2], tflops=flop / (best[0] * 1e6),
                          note="stopped (%s); best of the %d fully timed ok measurements it "
                               "saved" % (r.get("error", r["status"]), n_ok))
        rows[spec] = {"spec": spec, "dtype": env.get("dtype"), "autotune": at,
                      "sdpa": sdpa.get(spec, {"status": "not run"})}
    for spec, o in sdpa.items():
        rows.setdefault(spec, {"spec": spec, "dtype": None, "autotune": {"status": "not run"},
                               "sdpa": o})
    for r in rows.values():
        t_at, t_sd = r["autotune"].get("time_us"), r["sdpa"].get("median_ms")
        r["ratio_autotune_to_sdpa"] = (t_sd * 1e3 / t_at) if t_at and t_sd and \
            r["sdpa"].get("status") == "ok" else None
    return info, rows


def smoke_results(outdir):
    """The smoke test: each template/dtype/shape case, ok when a checked best was measured."""
    env = read_env(os.path.join(outdir, "steps", "smoke.env"))
    cases = []
    for path in sorted(glob.glob(os.path.join(outdir, "steps", "smoke_*.env"))):
        e = read_env(path)
        j = last_json_object(read(os.path.join(outdir, e.get("stdout", ""))))
        best = (j or {}).get("best") or {}
        measured = ((j or {}).get("candidates") or {}).get("measured", 0)
        ok = e.get("rc") == "0" and best.get("max_rel_error") is not None and measured > 0
        c = {"template": e.get("template"), "dtype": e.get("dtype"), "shape": e.get("shape"),
             "rc": e.get("rc"), "status": "ok" if ok else ("timeout" if e.get("rc") == "124" else "error"),
             "best": best, "wall_s": wall(e), "cmd": e.get("cmd")}
        if not ok:
            c["error"] = last_line(os.path.join(outdir, e.get("stderr", "")))
        cases.append(c)
    return {"verdict": env.get("verdict"), "gemm_template": env.get("gemm_template"), "cases": cases}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    outdir = sys.argv[1]
    mode = read_env(os.path.join(outdir, "steps", "mode.env"))
    build = read_env(os.path.join(outdir, "steps", "build.env"))
    cublas_info, cublas_cases = read_cublas(outdir)
    corr = correctness(outdir)
    rows = tuning(outdir, cublas_cases)
    sdpa_info, attn_rows = attention(outdir)
    comp_env = read_env(os.path.join(outdir, "steps", "compile.env"))
    compile_only = {"status": comp_env.get("status", "not run")}
    if comp_env.get("status") == "ran":
        j = last_json_object(read(os.path.join(outdir, "compile.json")))
        compile_only.update(rc=comp_env.get("rc"), cmd=comp_env.get("cmd"), wall_s=wall(comp_env),
                            result=j, log="compile.log")
        compile_only["status"] = "ok" if comp_env.get("rc") == "0" and j else "error"
        if compile_only["status"] == "error":
            compile_only["error"] = last_line(os.path.join(outdir, "compile.log"))
    ratios = {k: r["ratio_autotune_to_cublas"] for k, r in rows.items()}
    smoke = smoke_results(outdir)
    preflight = read(os.path.join(outdir, "preflight.txt")).strip()
    skipped = [l for l in read(os.path.join(outdir, "skipped.txt")).splitlines() if l.strip()]
    mode_name = mode.get("mode", "unknown")
    summary = {
        "date": read(os.path.join(outdir, "date.txt")).strip(),
        "mode": mode_name,
        "mode_note": mode.get("note"),
        "gpu": read(os.path.join(outdir, "gpu.txt")).strip(),
        "git_rev": read(os.path.join(outdir, "git-rev.txt")).strip(),
        "source_digest": read(os.path.join(outdir, "source-digest.txt")).strip(),
        "autotune": {"binary": build.get("binary"), "from": build.get("from"),
                     "build_status": build.get("status", "not run"),
                     "build_wall_s": wall(build)},
        "total_seconds": num(read(os.path.join(outdir, "total-seconds.txt")).strip()),
        "ratio_definition": "autotune TFLOP/s / cuBLAS (torch.matmul) TFLOP/s; >1: autotune faster",
        "ratios": ratios,
        "attention_ratio_definition": "SDPA (flash) median time / autotune best time; >1: "
                                      "autotune faster",
        "attention_ratios": {k: r["ratio_autotune_to_sdpa"] for k, r in attn_rows.items()},
        "attention": attn_rows,
        "sdpa": sdpa_info,
        "gemm": rows,
        "cublas": cublas_info,
        "correctness": corr,
        "compile_only": compile_only,
        "smoke": smoke,
        "preflight": preflight.splitlines(),
        "time_model": read(os.path.join(outdir, "time-model.txt")).strip().splitlines(),
        "skipped": skipped,
        "settings": read(os.path.join(outdir, "settings.txt")).strip().splitlines(),
    }

    L = []
    L.append("autotune GPU benchmark: autotune (cuda backend) vs cuBLAS (torch.matmul)")
    L.append("date:    %s" % summary["date"])
    L.append("gpu:     %s" % (summary["gpu"] or "-"))
    L.append("mode:    %s: %s" % (mode_name, mode.get("note", "")))
    if mode_name == "no-gpu":
        L.append("         no GPU: device steps skipped")
    if mode_name == "rehearsal":
        L.append("         rehearsal: stopped before the first device call")
    for line in preflight.splitlines():
        L.append("preflight: %s" % line)
    if smoke.get("cases"):
        L.append("smoke:   %s (f16/bf16 template from then on: %s)" % (
            smoke.get("verdict", "-"), smoke.get("gemm_template", "default")))
        for c in smoke["cases"]:
            if c["status"] != "ok":
                L.append("         %-10s %-4s %-16s %s %s" % (c["template"], c["dtype"], c["shape"],
                                                             c["status"], c.get("error", "")))
    L.append("autotune: %s (%s)" % (build.get("binary", "none"), build.get("from", build.get("status", "-"))))
    ce = cublas_info.get("env") or {}
    if ce:
        L.append("torch:   %s (CUDA %s) on %s; allow_tf32=%s" % (
            ce.get("torch"), ce.get("torch_cuda"), ce.get("device"), ce.get("allow_tf32")))
    L.append("git rev: %s  source digest: %s" % (summary["git_rev"], summary["source_digest"]))
    L.append("total:   %s s" % fmt(summary["total_seconds"], ".0f"))
    L.append("")
    L.append("GEMM C[m,n] = A[m,k] @ B[k,n], row-major (nn); TFLOP/s = 2mnk / kernel time")
    L.append("  %-5s %-17s %10s %10s %7s %8s %6s  %s" % (
        "dtype", "m x n x k", "autotune", "cuBLAS", "ratio", "tune s", "evals", "autotune best config / status"))
    for key, r in rows.items():
        at, cb = r["autotune"], r["cublas"]
        note = at.get("config") or ""
        if at.get("status") not in ("ok",):
            note = "%s%s" % (at.get("status"), (": " + (at.get("error") or at.get("note") or ""))
                             if (at.get("error") or at.get("note")) else "")
            if at.get("config"):
                note += "; best saved: " + at["config"]
        if cb.get("status") not in ("ok", None):
            note += "  [cuBLAS %s%s]" % (cb.get("status"), (": " + cb["error"]) if cb.get("error") else "")
        L.append("  %-5s %-17s %10s %10s %7s %8s %6s  %s" % (
            r["dtype"], r["shape"], fmt(at.get("tflops"), ".1f"), fmt(cb.get("tflops"), ".1f"),
            fmt(r["ratio_autotune_to_cublas"], ".3f"), fmt(at.get("tuning_seconds") or at.get("wall_s"), ".1f"),
            fmt(at.get("evaluated"), "d"), note))
    if not rows:
        L.append("  (no tuning or cuBLAS results)")
    L.append("  TFLOP/s columns: autotune best.gflops/1000 (its median kernel time, CUDA events);")
    L.append("  cuBLAS: median of CUDA-event times with a 256 MB L2 flush before each repetition.")
    L.append("  ratio = autotune / cuBLAS (1.0 = on par).  tune s = autotune's own 'seconds'.")
    L.append("")
    L.append("attention O = softmax(Q K^T / sqrt(D) [+ causal]) V, layout (B, S, H, D); TFLOP/s over "
             "the visible score pairs")
    L.append("  %-28s %10s %10s %7s %6s  %s" % ("B,H,G,S,S2,D,causal", "autotune", "SDPA",
                                               "ratio", "evals", "autotune best config / notes"))
    for spec, r in attn_rows.items():
        at, sd = r["autotune"], r["sdpa"]
        note = at.get("config") or ""
        if at.get("status") != "ok":
            note = "%s%s" % (at.get("status"), (": " + (at.get("error") or at.get("note") or ""))
                             if (at.get("error") or at.get("note")) else "")
        if sd.get("status") == "ok":
            note += "  [SDPA %s%s]" % (sd.get("backend"), ", gqa " + sd["gqa"]
                                       if sd.get("gqa") not in (None, "-") else "")
        elif sd.get("status"):
            note += "  [SDPA %s%s]" % (sd.get("status"), (": " + sd["error"][:120])
                                       if sd.get("error") else "")
        L.append("  %-28s %10s %10s %7s %6s  %s" % (
            spec, fmt(at.get("tflops"), ".1f"), fmt(sd.get("tflops"), ".1f"),
            fmt(r["ratio_autotune_to_sdpa"], ".3f"), fmt(at.get("evaluated"), "d"), note))
    if not attn_rows:
        L.append("  (no attention results: %s)" % (sdpa_info.get("note") or sdpa_info.get("status")))
    L.append("  autotune: its best median kernel time (CUDA events); SDPA: median CUDA-event time")
    L.append("  with the L2 flush. ratio = SDPA time / autotune time (above 1: autotune faster).")
    L.append("")
    ct = corr["ctest"]
    L.append("correctness:")
    L.append("  ctest -L gpu: %s%s" % (ct.get("status"), ("  (" + ct["note"] + ")") if ct.get("note") else ""))
    if corr["cases"]:
        L.append("  autotune gemm --backend cuda --budget N on awkward shapes: %s" % (
            ", ".join("%s %d" % kv for kv in sorted(corr["counts"].items()))))
        for d, cnt in sorted(corr["by_dtype"].items(), key=lambda kv: str(kv[0])):
            L.append("    %-5s %s" % (d, ", ".join("%s %d" % kv for kv in sorted(cnt.items()))))
        bad = [c for c in corr["cases"] if c["status"] not in ("ok", "skipped")]
        for c in bad[:40]:
            L.append("    %-11s %-5s %-2s %-12s %s" % (c["status"], c.get("dtype"), c.get("layout"),
                                                    c.get("shape"), c.get("error") or c.get("note") or
                                                    "max_rel_error %s" % c.get("max_rel_error")))
        if len(bad) > 40:
            L.append("    ... %d more (summary.json)" % (len(bad) - 40))
        errs = {}
        for c in corr["cases"]:
            if c["status"] == "ok" and c.get("max_rel_error") is not None:
                errs[c["dtype"]] = max(errs.get(c["dtype"], 0.0), c["max_rel_error"])
        if errs:
            L.append("    largest max_rel_error of passing cases: %s" % ", ".join(
                "%s %.3g" % kv for kv in sorted(errs.items())))
    else:
        L.append("  direct checks: not run")
    L.append("")
    if compile_only["status"] != "not run":
        res = compile_only.get("result") or {}
        L.append("compile-only (NVRTC, no device): %s; %s" % (
            compile_only["status"],
            "%s/%s compiled for %s, %s compile errors, %s rejected for resources, %.1f s" % (
                res.get("compiled"), res.get("attempted"), res.get("arch"), res.get("compile_errors"),
                res.get("resource_rejected"), res.get("seconds") or 0) if res else
            compile_only.get("error", "")))
        if compile_only.get("cmd"):
            L.append("  $ %s" % compile_only["cmd"])
        L.append("")
    ca_env = read_env(os.path.join(outdir, "steps", "compile_attention.env"))
    if ca_env.get("status") == "ran":
        res = last_json_object(read(os.path.join(outdir, "compile-attention.json"))) or {}
        ok = ca_env.get("rc") == "0" and res
        summary["compile_only_attention"] = {"status": "ok" if ok else "error", "result": res,
                                             "cmd": ca_env.get("cmd"),
                                             "log": "compile-attention.log"}
        L.append("compile-only attention (NVRTC, no device): %s; %s" % (
            "ok" if ok else "error",
            "%s/%s compiled for %s, %s compile errors, %s rejected for resources" % (
                res.get("compiled"), res.get("attempted"), res.get("arch"),
                res.get("compile_errors"), res.get("resource_rejected")) if ok else
            ([l for l in read(os.path.join(outdir, "compile-attention.log")).splitlines()
              if l.strip() and not l.startswith(("#", "$"))] or ["no output"])[-1][:300]))
        L.append("  $ %s" % ca_env.get("cmd"))
        L.append("")
    if skipped:
        L.append("skipped (%d; all in skipped.txt):" % len(skipped))
        L.extend("  " + s for s in skipped[:12])
        if len(skipped) > 12:
            L.append("  ... %d more" % (len(skipped) - 12))
        L.append("")
    L.append("commands:")
    if cublas_info.get("cmd"):
        L.append("  cublas: %s" % cublas_info["cmd"])
    if sdpa_info.get("cmd"):
        L.append("  sdpa: %s" % sdpa_info["cmd"])
    for spec, r in attn_rows.items():
        if r["autotune"].get("cmd"):
            L.append("  attention %s: %s" % (spec, r["autotune"]["cmd"]))
    for key, r in rows.items():
        if r["autotune"].get("cmd"):
            L.append("  %s: %s" % (key, r["autotune"]["cmd"]))
    L.append("raw logs: env.log build.log correctness.log (correctness/) cublas.log cublas.jsonl "
             "tune.log (tune/) compile.log run.log steps/")
    txt = "\n".join(L) + "\n"
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write(txt)


if __name__ == "__main__":
    main()
