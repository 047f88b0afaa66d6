#!/usr/bin/env python3
"""Time PyTorch's scaled_dot_product_attention on the CPU, f32, for benchmarks/pocl/attention.sh.

Usage: torch_attention.py --shapes "B,H,G,S,S2,D,C ..." [--threads 2] [--min-seconds 1]
                          [--max-runs 10]

Each shape is batch, heads, kv-heads, seq, seq-kv, head-dim, causal (0/1). Q is (B, H, S, D),
K and V (B, G, S2, D), contiguous torch.randn f32; grouped-query heads use enable_gqa=True.
Causal is aligned bottom-right like autotune's (docs/attention.md): is_causal=True when
S == S2, else the causal_lower_right mask of torch.nn.attention.bias.

Timing, the same rule as attention_peers.c: one untimed warm-up call, then calls until
--min-seconds of timed calls or --max-runs calls (at least 3), each timed with
time.perf_counter around the call (the CPU kernels are synchronous); the median is reported.
One output row of the first and last (batch, head) is checked against a float64 reference.

Output: one JSON object per line: {"kind": "env", ...}, then {"kind": "case", ...} per shape.
Exit 3 when torch cannot be imported.
"""
import argparse
import json
import math
import statistics
import sys
import time


def emit(obj):
    print(json.dumps(obj), flush=True)


def reference_row(q, k, v, b, h, i, causal, group):
    """Row i of head (b, h) in float64, bottom-right causal."""
    s, s2 = q.shape[2], k.shape[2]
    qr = q[b, h, i].double()
    kh, vh = k[b, h // group].double(), v[b, h // group].double()
    n = min(s2, i + (s2 - s) + 1) if causal else s2
    sc = (kh[:n] @ qr) / math.sqrt(q.shape[3])
    p = (sc - sc.max()).exp()
    p = p / p.sum()
    return p @ vh[:n], p @ vh[:n].abs()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-seconds", type=float, default=1.0)
    ap.add_argument("--max-runs", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        emit({"kind": "env", "status": "no torch", "error": "%s: %s" % (type(e).__name__, e)})
        return 3
    torch.set_num_threads(args.threads)
    emit({"kind": "env", "status": "ok", "torch": torch.__version__,
          "python": sys.version.split()[0], "threads": torch.get_num_threads(),
          "mkldnn": torch.backends.mkldnn.is_available(),
          "config": torch.__config__.parallel_info().splitlines()[:6],
          "min_seconds": args.min_seconds, "max_runs": args.max_runs})
    torch.manual_seed(0)
    for spec in args.shapes.split():
        B, H, G, S, S2, D, C = (int(x) for x in spec.split(","))
        case = {"kind": "case", "batch": B, "heads": H, "kv_heads": G, "seq": S, "seq_kv": S2,
                "head_dim": D, "causal": bool(C)}
        try:
            q = torch.randn(B, H, S, D)
            k = torch.randn(B, G, S2, D)
            v = torch.randn(B, G, S2, D)
            kw = {}
            if G != H:
                kw["enable_gqa"] = True
            if C and S == S2:
                kw["is_causal"] = True
            elif C:
                from torch.nn.attention.bias import causal_lower_right
                kw["attn_mask"] = causal_lower_right(S, S2)
            case["call"] = "scaled_dot_product_attention(q, k, v, %s)" % ", ".join(
                "%s=%s" % (a, "causal_lower_right(%d, %d)" % (S, S2) if a == "attn_mask" else b)
                for a, b in kw.items())

            def call():
                return F.scaled_dot_product_attention(q, k, v, **kw)

            t0 = time.perf_counter()
            o = call()
            warm = time.perf_counter() - t0
            err = 0.0
            for (b, h) in ((0, 0), (B - 1, H - 1)):
                for i in (0, S // 2, S - 1):
                    ref, mag = reference_row(q, k, v, b, h, i, C, H // G)
                    e = ((o[b, h, i].double() - ref).abs() / mag.clamp(min=1e-30)).max().item()
                    err = max(err, e)
            times = []
            while len(times) < 3 or (len(times) < args.max_runs and sum(times) < args.min_seconds):
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
            case.update(status="ok" if err < 1e-3 else "large_error", max_rel_error=err,
                        median_ms=statistics.median(times) * 1e3, min_ms=min(times) * 1e3,
                        max_ms=max(times) * 1e3, runs=len(times), warmup_ms=warm * 1e3)
        except Exception as e:  # noqa: BLE001 - one failed case must not stop the rest
            case.update(status="error", error="%s: %s" % (type(e).__name__, str(e)[:300]))
        emit(case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
