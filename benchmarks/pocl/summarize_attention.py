#!/usr/bin/env python3
"""Summarise an attention.sh run: OUTDIR/summary.txt and summary.json.

Usage: summarize_attention.py OUTDIR "B,H,G,S,S2,D,C ..."

Per shape: ours (the tuned kernel timed through the library; autotune's own median event time
beside it), the unfused GEMM-softmax-GEMM version, PyTorch SDPA; GFLOP/s over the visible
score pairs (4 * D FLOPs each); and the ratios ours/PyTorch and ours/unfused as speed ratios
(the peer's time / ours: above 1, ours is faster). Stdlib only.
"""
import json
import os
import sys


def read_env(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                out[k] = v
    except OSError:
        pass
    return out


def read_json(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def tag_of(b, h, g, s, s2, d, c):
    return "b%d_h%d_g%d_s%d_kv%d_d%d%s" % (b, h, g, s, s2, d, "_causal" if c else "")


def pairs(s, s2, c):
    return s * s2 - s * (s - 1) // 2 if c else s * s2


def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def main():
    outdir, shapes = sys.argv[1], sys.argv[2].split()
    torch_cases, torch_env = {}, None
    try:
        with open(os.path.join(outdir, "torch.jsonl")) as f:
            for line in f:
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if o.get("kind") == "env":
                    torch_env = o
                elif o.get("kind") == "case":
                    key = (o["batch"], o["heads"], o["kv_heads"], o["seq"], o["seq_kv"],
                           o["head_dim"], int(o["causal"]))
                    torch_cases[key] = o
    except OSError:
        pass

    rows = []
    for spec in shapes:
        b, h, g, s, s2, d, c = (int(x) for x in spec.split(","))
        tag = tag_of(b, h, g, s, s2, d, c)
        flop = 4.0 * d * b * h * pairs(s, s2, c)
        row = {"shape": {"batch": b, "heads": h, "kv_heads": g, "seq": s, "seq_kv": s2,
                         "head_dim": d, "causal": bool(c)}, "tag": tag, "gflop": flop / 1e9}
        at = read_json(os.path.join(outdir, "autotune_%s.json" % tag))
        at_step = read_env(os.path.join(outdir, "steps", "autotune_%s.env" % tag))
        if at and "best" in at:
            row["autotune"] = {"config": at["best"].get("config"),
                               "time_us": at["best"].get("time_us"),
                               "max_rel_error": at["best"].get("max_rel_error"),
                               "evaluated": at.get("candidates", {}).get("evaluated"),
                               "space": at.get("candidates", {}).get("space"),
                               "seconds": at.get("seconds"), "template": at.get("template")}
        else:
            row["autotune"] = {"status": at_step.get("status", "missing"),
                               "rc": at_step.get("rc")}
        peers = read_json(os.path.join(outdir, "peers_%s.json" % tag))
        pstep = read_env(os.path.join(outdir, "steps", "peers_%s.env" % tag))
        row["peers_rc"] = pstep.get("rc")
        for name in ("ours", "unfused", "gemm_qk", "gemm_pv"):
            row[name] = (peers or {}).get(name) or {"status": pstep.get("status", "missing")
                                                    if not peers else "absent"}
        tc = torch_cases.get((b, h, g, s, s2, d, c))
        row["torch"] = tc or {"status": "missing"}

        def ms(o):
            return o.get("median_ms") if o.get("status") == "ok" else None

        t_ours, t_unf, t_torch = ms(row["ours"]), ms(row["unfused"]), ms(row["torch"])
        row["ratio_vs_torch"] = t_torch / t_ours if t_ours and t_torch else None
        row["ratio_vs_unfused"] = t_unf / t_ours if t_ours and t_unf else None
        # by the fastest call too: on a shared machine the medians carry the contention
        m_ours, m_unf, m_torch = (row[k].get("min_ms") if row[k].get("status") == "ok"
                                  else None for k in ("ours", "unfused", "torch"))
        row["min_ratio_vs_torch"] = m_torch / m_ours if m_ours and m_torch else None
        row["min_ratio_vs_unfused"] = m_unf / m_ours if m_ours and m_unf else None
        for name, t in (("ours", t_ours), ("unfused", t_unf), ("torch", t_torch)):
            if t:
                row[name]["gflops"] = flop / (t * 1e6)
        rows.append(row)

    lines = ["f32 attention on PoCL: O = softmax(Q K^T / sqrt(D) [+ causal]) V, layout (B, H, S, D)",
             "times: median host wall ms per call (same rule for all three); GFLOP/s over the "
             "visible score pairs; ratio = peer time / ours (above 1: ours faster)",
             "",
             "  %-34s %9s %9s %9s %9s   %7s %7s   %s" % (
                 "shape B,H,G,S,S2,D,causal", "ours ms", "(tuner)", "unfused", "torch",
                 "x torch", "x unfus", "ours config / notes")]
    for r in rows:
        sh = r["shape"]
        name = "%d,%d,%d,%d,%d,%d,%s" % (sh["batch"], sh["heads"], sh["kv_heads"], sh["seq"],
                                         sh["seq_kv"], sh["head_dim"],
                                         "causal" if sh["causal"] else "full")
        notes = []
        for k in ("ours", "unfused", "torch"):
            st = r[k].get("status")
            if st != "ok":
                notes.append("%s: %s" % (k, st))
        tuner_ms = r["autotune"].get("time_us")
        lines.append("  %-34s %9s %9s %9s %9s   %7s %7s   %s" % (
            name, fmt(r["ours"].get("median_ms"), ".3f"),
            fmt(tuner_ms / 1e3 if isinstance(tuner_ms, (int, float)) else None, ".3f"),
            fmt(r["unfused"].get("median_ms"), ".3f"), fmt(r["torch"].get("median_ms"), ".3f"),
            fmt(r["ratio_vs_torch"], ".2f"), fmt(r["ratio_vs_unfused"], ".2f"),
            "; ".join([r["autotune"].get("config") or ""] + notes)))
    lines.append("")
    lines.append("  GFLOP/s: ours / unfused / torch (median);  ratios by the fastest call: x torch, "
                 "x unfused")
    for r in rows:
        lines.append("  %-34s %s / %s / %s   min: %s, %s   (tuning: %s evaluated of %s in %s s)" % (
            r["tag"], fmt(r["ours"].get("gflops"), ".2f"), fmt(r["unfused"].get("gflops"), ".2f"),
            fmt(r["torch"].get("gflops"), ".2f"), fmt(r["min_ratio_vs_torch"], ".2f"),
            fmt(r["min_ratio_vs_unfused"], ".2f"), r["autotune"].get("evaluated", "-"),
            r["autotune"].get("space", "-"), fmt(r["autotune"].get("seconds"), ".0f")))
    lines.append("")

    def cat(name):
        try:
            with open(os.path.join(outdir, name)) as f:
                return f.read().strip()
        except OSError:
            return "-"

    lines.append("date: %s   git: %s" % (cat("date.txt"), cat("git-rev.txt")))
    lines.append("device: %s" % cat("clinfo-l.txt").replace("\n", " | "))
    cpu = [ln for ln in cat("lscpu.txt").splitlines() if ln.startswith(("Model name", "CPU(s)"))]
    lines.append("cpu: %s" % " | ".join(x.split(":", 1)[1].strip() for x in cpu))
    if torch_env:
        lines.append("torch: %s, %s threads (%s)" % (torch_env.get("torch"),
                                                      torch_env.get("threads"),
                                                      torch_env.get("status")))
    lines.append("load: %s" % cat("load.txt").replace("\n", " | "))
    lines.append("settings: %s" % cat("settings.txt").replace("\n", " | "))
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump({"rows": rows, "torch_env": torch_env,
                   "ratios": {r["tag"]: {"vs_torch": r["ratio_vs_torch"],
                                         "vs_unfused": r["ratio_vs_unfused"],
                                         "min_vs_torch": r["min_ratio_vs_torch"],
                                         "min_vs_unfused": r["min_ratio_vs_unfused"]}
                              for r in rows}},
                  f, indent=1)


if __name__ == "__main__":
    main()
