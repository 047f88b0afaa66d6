#!/usr/bin/env python3
"""Summarize a benchmarks/pocl/run.sh output directory (stdlib only).

Usage: summarize.py OUTDIR "PROBLEMS"       -> writes OUTDIR/summary.json and OUTDIR/summary.txt
       summarize.py --tuner-log STDOUT.log S -> prints the parsed clblast_tuner_xgemm result (debug)

PROBLEMS: space-separated MxNxK:LAYOUT (steps named <tool>_MxNxK_LAYOUT), or a plain S for
m = n = k = S, nn (steps named <tool>_S: the runs before layouts were added).
"""
import glob
import json
import os
import re
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return default


def read_env(path):
    d = {}
    for line in read(path).splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            d[k] = v
    return d


def last_json_object(text):
    """The last line of text that parses as a JSON object (autotune/peers print one)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    try:
        return json.loads(text)
    except ValueError:
        return None


class Problem:
    """One benchmark problem: sizes, layout, the step names' suffix and its FLOP count."""

    def __init__(self, token):
        if re.fullmatch(r"\d+", token):
            self.m = self.n = self.k = int(token)
            self.layout, self.tag = "nn", token
            self.label = "m=n=k=%s" % token
        else:
            mt = re.fullmatch(r"(\d+)x(\d+)x(\d+):(nn|nt|tn|tt)", token)
            if not mt:
                sys.exit("summarize.py: bad problem '%s' (MxNxK:LAYOUT or S)" % token)
            self.m, self.n, self.k = (int(mt.group(i)) for i in (1, 2, 3))
            self.layout = mt.group(4)
            self.tag = "%dx%dx%d_%s" % (self.m, self.n, self.k, self.layout)
            self.label = "m=%d n=%d k=%d %s" % (self.m, self.n, self.k, self.layout)
        self.flop = 2.0 * self.m * self.n * self.k

    def __str__(self):
        return self.tag


def gflops(prob, ms):
    flop = prob.flop if isinstance(prob, Problem) else 2.0 * prob ** 3
    return flop / (ms * 1e6) if ms and ms > 0 else None


def wall(env):
    try:
        return float(env["t1"]) - float(env["t0"])
    except (KeyError, ValueError):
        return None


# ---- clblast_tuner_xgemm ------------------------------------------------------------------

def parse_tuner_stdout(text, size):
    """Parse the tables clblast_tuner_xgemm (CLBlast 1.5.x) prints: 4 stages, one row per config."""
    stages, cur, names = [], None, []
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        m = re.match(r"^\* \((\d+)/(\d+)\) (.*)$", line)
        if m:
            if cur is not None:
                cur["finished"] = True  # the tuner went on to the next stage
            cur = {"stage": int(m.group(1)), "of": int(m.group(2)), "title": m.group(3),
                   "space": None, "explored": None, "ok": 0, "failed": 0,
                   "best_ms": None, "best_params": None, "completed": False,
                   "finished": False, "reference_ok": False}
            stages.append(cur)
            continue
        if cur is None:
            continue
        m = re.match(r"^\* Found (\d+) configuration", line)
        if m:
            cur["space"] = int(m.group(1))
            cur["explored"] = cur["space"]
            continue
        m = re.match(r"^\* Exploring a random subset of (\d+) configuration", line)
        if m:
            cur["explored"] = int(m.group(1))
            continue
        m = re.match(r"^\* Parameters explored: (.*)$", line)
        if m:
            names = m.group(1).split()
            continue
        if line.startswith("* Completed tuning process"):
            cur["completed"] = cur["finished"] = True
            continue
        if re.match(r"^\|\s*ref\s*\|", line) and "reference OK" in line:
            cur["reference_ok"] = True
            if cur["explored"] == 0:
                cur["finished"] = True  # nothing to explore: done after the reference
            continue
        m = re.match(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|(.*)$", line)
        if not m:
            continue
        fields = [f.strip() for f in m.group(3).split("|")]
        if not any("results match" in f for f in fields):
            # a failed config says why (error code, invalid config, L2 error, <-- skipping);
            # a half-printed last row (run stopped by the timeout) is ignored
            if re.search(r"skipping|error|invalid", line):
                cur["failed"] += 1
            continue
        times = [f for f in fields if re.fullmatch(r"[0-9.]+ ms", f)]
        if not times:
            cur["failed"] += 1
            continue
        t = float(times[0].split()[0])
        cur["ok"] += 1
        if cur["best_ms"] is None or t < cur["best_ms"]:
            cur["best_ms"] = t
            vals = fields[0].split()
            cur["best_params"] = (" ".join("%s=%s" % kv for kv in zip(names, vals))
                                  if len(vals) == len(names) else fields[0])
    for s in stages:
        s["best_gflops"] = gflops(size, s["best_ms"])
    best = None
    for s in stages:
        if s["best_ms"] is not None and (best is None or s["best_ms"] < best["best_ms"]):
            best = s
    return {
        "stages": stages,
        "configs_ok": sum(s["ok"] for s in stages),
        "configs_failed": sum(s["failed"] for s in stages),
        "configs_planned": sum(s["explored"] or 0 for s in stages),
        "space_total": sum(s["space"] or 0 for s in stages),
        "stages_finished": sum(1 for s in stages if s["finished"]),
        "stages_total": stages[0]["of"] if stages else None,
        "best_ms": best["best_ms"] if best else None,
        "best_gflops": best["best_gflops"] if best else None,
        "best_stage": best["stage"] if best else None,
        "best_params": best["best_params"] if best else None,
    }


def parse_tuner_jsons(d, size):
    out = []
    for path in sorted(glob.glob(os.path.join(d, "clblast_*.json"))):
        try:
            j = json.loads(read(path))
        except ValueError:
            out.append({"file": os.path.basename(path), "error": "not valid JSON"})
            continue
        bt = float(j.get("best_time", "nan"))
        out.append({"file": os.path.basename(path), "kernel_family": j.get("kernel_family"),
                    "best_time_ms": bt, "best_gflops": gflops(size, bt),
                    "best_parameters": j.get("best_parameters"),
                    "results": len(j.get("results", []))})
    return out


def time_v(path):
    t = read(path)
    r = {}
    m = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", t)
    if m:
        parts = [float(x) for x in m.group(1).split(":")]
        sec = 0.0
        for p in parts:
            sec = sec * 60 + p
        r["elapsed_s"] = sec
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", t)
    if m:
        r["max_rss_kb"] = int(m.group(1))
    for key, label in (("user_s", "User time"), ("sys_s", "System time")):
        m = re.search(label + r" \(seconds\): ([0-9.]+)", t)
        if m:
            r[key] = float(m.group(1))
    return r


# ---- rows ---------------------------------------------------------------------------------

def row_autotune(outdir, size):
    env = read_env(os.path.join(outdir, "steps", "autotune_%s.env" % size))
    st = env.get("status", "not run")
    row = {"status": st, "gflops": None, "tuning_wall_s": None}
    if st == "missing":
        row["note"] = "autotune binary missing: %s" % env.get("binary", "?")
        return row
    if st != "ran":
        row["note"] = st
        return row
    row["cmd"] = env.get("cmd")
    row["rc"] = int(env.get("rc", "-1"))
    row["tuning_wall_s"] = wall(env)
    j = last_json_object(read(os.path.join(outdir, env.get("stdout", ""))))
    if row["rc"] != 0 or not isinstance(j, dict) or "best" not in j:
        row["status"] = "error"
        err = read(os.path.join(outdir, env.get("stderr", ""))).strip().splitlines()
        row["note"] = "exit %d%s" % (row["rc"], (": " + err[-1][:160]) if err else "")
        return row
    best = j.get("best") or {}
    row["status"] = "ok"
    row["gflops"] = best.get("gflops")
    row["time_us"] = best.get("time_us")
    row["gflops_from_time_us"] = gflops(size, (best.get("time_us") or 0) / 1e3)
    row["config"] = best.get("config")
    row["max_rel_error"] = best.get("max_rel_error")
    row["candidates"] = j.get("candidates")
    row["cache"] = j.get("cache")
    row["seconds_reported"] = j.get("seconds")
    row["backend"] = j.get("backend")
    row["device"] = j.get("device")
    row["problem"] = j.get("problem")
    c = j.get("candidates") or {}
    row["note"] = "best %s; %.1f us (OpenCL events, median); err %s; %s evaluated, %s failed of %s; " \
                  "cache %s; reported %ss" % (
                      best.get("config"), best.get("time_us") or 0, best.get("max_rel_error"),
                      c.get("evaluated"), c.get("failed"), c.get("space"), j.get("cache"),
                      j.get("seconds"))
    dev = read(os.path.join(outdir, "clinfo-l.txt"))
    if j.get("device") and j["device"] not in dev:
        row["note"] += "  WARNING: device '%s' is not the PoCL device in clinfo -l" % j["device"]
    if j.get("cache") == "hit":
        row["note"] += "  WARNING: cache hit, tuning time is not a tuning time"
    return row


def rows_peers(outdir, size):
    env = read_env(os.path.join(outdir, "steps", "peers_%s.env" % size))
    st = env.get("status", "not run")
    cl = {"status": st, "gflops": None, "tuning_wall_s": None}
    ob = {"status": st, "gflops": None, "tuning_wall_s": None}
    if st != "ran":
        cl["note"] = ob["note"] = st
        return cl, ob, None
    j = last_json_object(read(os.path.join(outdir, env.get("stdout", ""))))
    if not isinstance(j, dict):
        err = read(os.path.join(outdir, env.get("stderr", ""))).strip().splitlines()
        cl["status"] = ob["status"] = "error"
        cl["note"] = ob["note"] = "peers exit %s%s" % (env.get("rc"), (": " + err[-1][:160]) if err else "")
        return cl, ob, None
    c = j.get("clblast", {})
    cl.update(c)
    cl["gflops"] = c.get("gflops")
    if c.get("status") == "ok":
        cl["note"] = "median %.1f ms, min %.1f ms over %d calls (host wall, whole routine); " \
                     "max rel err %.2g; first call %.1f s (compiles)" % (
                         c["median_ms"], c["min_ms"], c["runs"], c["max_rel_error"], c.get("warmup_s", -1))
    else:
        cl["note"] = c.get("error", c.get("status"))
    o = j.get("openblas", {})
    ob.update(o)
    ob["gflops"] = o.get("gflops")
    if o.get("status") == "ok":
        ob["note"] = "median %.1f ms, min %.1f ms over %d calls; core %s, %s thread(s)" % (
            o["median_ms"], o["min_ms"], o["runs"], o.get("corename"), o.get("threads"))
    else:
        ob["note"] = o.get("status")
    return cl, ob, env.get("cmd")


def row_tuner(outdir, size):
    name = "clblast_tuner_%s" % size
    env = read_env(os.path.join(outdir, "steps", name + ".env"))
    st = env.get("status", "not run")
    row = {"status": st, "gflops": None, "tuning_wall_s": None}
    if st != "ran":
        row["note"] = st if st != "missing" else "clblast tuner missing: %s" % env.get("binary")
        return row
    d = os.path.join(outdir, name)
    row["cmd"] = env.get("cmd")
    row["rc"] = int(env.get("rc", "-1"))
    row["fraction"] = env.get("fraction")
    row["runs"] = env.get("runs")
    row["tuning_wall_s"] = wall(env)
    row["time_v"] = time_v(os.path.join(d, "time-v.txt"))
    p = parse_tuner_stdout(read(os.path.join(d, "stdout.log")), size.m if isinstance(size, Problem) else size)
    row["parsed"] = p
    row["json_files"] = parse_tuner_jsons(d, size)
    row["gflops"] = p["best_gflops"]
    row["best_ms"] = p["best_ms"]
    row["best_params"] = p["best_params"]
    jbest = [x["best_gflops"] for x in row["json_files"] if x.get("best_gflops")]
    row["json_best_gflops"] = max(jbest) if jbest else None
    if row["rc"] in (124, 137):
        row["status"] = "timeout"
    elif row["rc"] != 0:
        row["status"] = "error"
    elif p["best_ms"] is None:
        row["status"] = "no results"
    else:
        row["status"] = "ok"
    row["note"] = "%s; -fraction %s -runs %s: %d configs ok, %d failed (%d planned of %d); " \
                  "%d/%s stages done; best %s ms in stage %s: %s" % (
                      row["status"], row["fraction"], row["runs"], p["configs_ok"],
                      p["configs_failed"], p["configs_planned"], p["space_total"],
                      p["stages_finished"], p["stages_total"], p["best_ms"], p["best_stage"], p["best_params"])
    return row


# ---- output -------------------------------------------------------------------------------

def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--tuner-log":
        print(json.dumps(parse_tuner_stdout(read(sys.argv[2]), int(sys.argv[3])), indent=1))
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    outdir, sizes = sys.argv[1], [Problem(s) for s in sys.argv[2].split()]

    device_line = "; ".join(l.strip() for l in read(os.path.join(outdir, "clinfo-l.txt")).splitlines()
                            if "Device" in l or "Platform" in l)
    cpu = ""
    for l in read(os.path.join(outdir, "lscpu.txt")).splitlines():
        if l.startswith("Model name:"):
            cpu = l.split(":", 1)[1].strip()
    cpus = ""
    for l in read(os.path.join(outdir, "lscpu.txt")).splitlines():
        if l.startswith("CPU(s):"):
            cpus = l.split(":", 1)[1].strip()
    summary = {
        "date": read(os.path.join(outdir, "date.txt")).strip(),
        "problem": "SGEMM C = op(A)*op(B), f32, row-major, alpha=1, beta=0; layout nt: B stored "
                   "N x K (op(B) = B^T), tn: A stored K x M",
        "wall_s": read(os.path.join(outdir, "wall.txt")).strip(),
        "device": device_line,
        "cpu_model": cpu,
        "cpus": cpus,
        "load_at_start": read(os.path.join(outdir, "load.txt")).strip(),
        "packages": read(os.path.join(outdir, "packages.txt")).strip().splitlines(),
        "git_rev": read(os.path.join(outdir, "git-rev.txt")).strip(),
        "settings": read(os.path.join(outdir, "settings.txt")).strip().splitlines(),
        "peers_build_cmd": read(os.path.join(outdir, "peers-build.cmd")).strip(),
        "sizes": {},
    }
    order = [("autotune", "autotune tuned"), ("clblast_shipped", "CLBlast shipped"),
             ("clblast_tuner", "CLBlast tuner best"), ("openblas", "OpenBLAS (CPU)")]
    lines = []
    lines.append("autotune PoCL side-by-side SGEMM benchmark")
    lines.append("date:    %s" % summary["date"])
    lines.append("device:  %s" % device_line)
    lines.append("cpu:     %s (%s CPUs)" % (cpu, cpus))
    lines.append("load:    %s" % summary["load_at_start"].replace("\n", " | "))
    lines.append("problem: %s" % summary["problem"])
    lines.append("")
    for S in sizes:
        cl, ob, peers_cmd = rows_peers(outdir, S)
        rows = {"autotune": row_autotune(outdir, S), "clblast_shipped": cl,
                "clblast_tuner": row_tuner(outdir, S), "openblas": ob}
        if peers_cmd:
            cl["cmd"] = ob["cmd"] = peers_cmd
        base = rows["autotune"].get("gflops")
        for r in rows.values():
            g = r.get("gflops")
            r["ratio_to_autotune"] = (g / base) if (g and base) else None
        summary["sizes"][str(S)] = rows
        lines.append(S.label)
        lines.append("  %-20s %10s %12s %16s  %s" % ("", "GFLOP/s", "x autotune", "tuning wall s", "notes"))
        for key, label in order:
            r = rows[key]
            ratio = r["ratio_to_autotune"]
            lines.append("  %-20s %10s %12s %16s  %s" % (
                label, fmt(r.get("gflops"), ".2f"), fmt(ratio, ".2f") if ratio else "-",
                fmt(r.get("tuning_wall_s"), ".1f"), r.get("status") if r.get("status") != "ok" and
                not r.get("note") else r.get("note", "")))
        lines.append("")
    lines.append("ratios (autotune GFLOP/s over the peer's):")
    lines.append("  %-28s %9s %9s %9s %9s %9s" % ("", "autotune", "OpenBLAS", "x OpenBLAS", "CLBlast",
                                                   "x CLBlast"))
    for S in sizes:
        rows = summary["sizes"][str(S)]
        a, o, c = (rows[k].get("gflops") for k in ("autotune", "openblas", "clblast_shipped"))
        lines.append("  %-28s %9s %9s %9s %9s %9s" % (
            S.label, fmt(a, ".1f"), fmt(o, ".1f"), fmt(a / o, ".2f") if a and o else "-",
            fmt(c, ".1f"), fmt(a / c, ".1f") if a and c else "-"))
    lines.append("")
    if summary["wall_s"]:
        lines.append("whole run: %s s wall" % summary["wall_s"])
        lines.append("")
    lines.append("GFLOP/s = 2*m*n*k / time.  autotune: its best.gflops (median kernel time from OpenCL")
    lines.append("profiling events, kernel only).  CLBlast shipped / OpenBLAS: median host wall time of")
    lines.append("whole calls (peers.c).  CLBlast tuner: fastest config, host wall time of its Xgemm kernel")
    lines.append("alone (min over -runs after a warm-up), sampled 1/fraction of each of its 4 spaces.")
    lines.append("'x autotune' = row GFLOP/s / autotune GFLOP/s.  Tuning wall = whole process, date-to-date.")
    lines.append("")
    lines.append("commands (cwd = OUTDIR for the tuner, absolute paths otherwise):")
    lines.append("  build: %s" % summary["peers_build_cmd"])
    for S in sizes:
        rows = summary["sizes"][str(S)]
        for key in ("autotune", "clblast_shipped", "clblast_tuner"):
            if rows[key].get("cmd"):
                lines.append("  %s %s: %s" % ("peers" if key == "clblast_shipped" else key, S,
                                              rows[key]["cmd"]))
    lines.append("")
    lines.append("settings:")
    lines.extend("  " + s for s in summary["settings"])
    lines.append("packages: " + ", ".join(summary["packages"]))
    lines.append("git rev: " + summary["git_rev"])
    txt = "\n".join(lines) + "\n"
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(os.path.join(outdir, "summary.txt"), "w") as f:
        f.write(txt)


if __name__ == "__main__":
    main()
