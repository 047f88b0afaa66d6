#!/usr/bin/env python3
"""Time torch.matmul (cuBLAS / cuBLASLt) on the GEMM shapes of the GPU benchmark.

Usage: torch_bench.py [--dtypes "bf16 f16 f32"] [--shapes "MxNxK ..."] [--warmup 5]
                      [--reps 30] [--min-reps 5] [--max-seconds 1.0] [--flush-mb 256]
                      [--device 0] [--deadline-s S]
                      [--attention "B,H,G,S,S2,D,C ..."] [--attn-dtype f16] [--dry-run]

Problem: C[m,n] = A[m,k] @ B[k,n], all row-major (contiguous), output dtype = input dtype,
A and B filled with torch.randn. f32 runs with torch.backends.cuda.matmul.allow_tf32 = False
(and cudnn's too), so it is a true f32 GEMM, not TF32. Everything else is PyTorch's default
(recorded in the output: the reduced-precision-reduction flags for f16/bf16).

Timing per case: `--warmup` untimed calls, then repetitions; before each repetition a
`--flush-mb` MB buffer is written (zero_) so L2 (50 MB on H200) is cold, then one
torch.matmul(a, b, out=c) between two CUDA events. Repetitions go on until `--reps`, or until
the timed sum passes `--max-seconds` (never fewer than `--min-reps`). The median is reported
(min and max too).

Attention (--attention; give --dtypes "" to time only attention): each spec is batch, heads,
kv-heads, seq, seq-kv, head-dim, causal (0/1). Q is a (B, H, S, D) view of a contiguous
(B, S, H, D) tensor (autotune's default layout bshd), K and V likewise with G heads;
torch.nn.functional.scaled_dot_product_attention under
torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION). Grouped-query heads (G < H) try
flash with enable_gqa=True, then the efficient backend with enable_gqa=True, then the
efficient backend on K and V expanded to H heads beforehand (repeat_interleave, outside the
timing; "gqa": "expanded" says so). Causal needs S == S2 here (is_causal=True is then the same
as autotune's bottom-right alignment; flash takes no mask). Same timing rule as the GEMMs;
TFLOP/s over the visible score pairs, 4 * D FLOPs each; one output row checked against
float64. One {"kind": "attention", ...} line per spec. --dry-run prints the plan (one
{"kind": "plan", ...} line per case, arguments checked) without importing torch.

Output: one JSON object per line on stdout: first {"kind": "env", ...}, then one
{"kind": "case", "dtype", "m", "n", "k", "status", "median_ms", "min_ms", "max_ms", "reps",
"tflops", "gflops", ...} per dtype x shape, in order; a case that fails prints status "error"
and the message, and the next case runs. Stdlib + torch only. Exit 0 if torch ran (even with
failed cases), 3 if torch or CUDA is missing (one {"kind": "env", "status": "..."} line).
"""
import argparse
import json
import statistics
import sys
import time

DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
DEFAULT_SHAPES = "8192x8192x8192 4096x4096x4096 8192x28672x8192 16x8192x8192 4096x1024x14336"


def emit(obj):
    print(json.dumps(obj), flush=True)


def parse_shape(s):
    m, n, k = (int(x) for x in s.lower().split("x"))
    return m, n, k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="bf16 f16 f32")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--min-reps", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=1.0)
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--deadline-s", type=float, default=0,
                    help="stop starting new cases after this many seconds (0: no limit)")
    ap.add_argument("--attention", default="",
                    help="attention specs B,H,G,S,S2,D,C (causal 0/1), space-separated")
    ap.add_argument("--attn-dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--dry-run", action="store_true",
                    help="check the arguments and print the plan; import nothing")
    args = ap.parse_args()
    t_start = time.monotonic()
    try:
        attn = [parse_attention(s) for s in args.attention.split()]
        shapes = [parse_shape(s) for s in args.shapes.split()]
    except ValueError as e:
        emit({"kind": "env", "status": "bad arguments", "error": str(e)})
        return 2
    if args.dry_run:
        for dname in args.dtypes.split():
            for (m, n, k) in shapes:
                emit({"kind": "plan", "what": "torch.matmul", "dtype": dname, "m": m, "n": n,
                      "k": k})
        for a in attn:
            emit(dict(a, kind="plan", what="sdpa flash", dtype=args.attn_dtype))
        return 0

    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        emit({"kind": "env", "status": "no torch", "error": "%s: %s" % (type(e).__name__, e),
              "python": sys.version.split()[0]})
        return 3
    if not torch.cuda.is_available():
        emit({"kind": "env", "status": "no cuda", "torch": torch.__version__,
              "torch_cuda": torch.version.cuda, "python": sys.version.split()[0]})
        return 3

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    mm = torch.backends.cuda.matmul
    emit({"kind": "env", "status": "ok", "torch": torch.__version__,
          "torch_cuda": torch.version.cuda,
          "python": sys.version.split()[0], "device": torch.cuda.get_device_name(dev),
          "sm": "%d.%d" % (props.major, props.minor),
          "multiprocessors": props.multi_processor_count,
          "memory_gib": round(props.total_memory / 2 ** 30, 1),
          "allow_tf32": mm.allow_tf32,
          "allow_fp16_reduced_precision_reduction":
              getattr(mm, "allow_fp16_reduced_precision_reduction", None),
          "allow_bf16_reduced_precision_reduction":
              getattr(mm, "allow_bf16_reduced_precision_reduction", None),
          "warmup": args.warmup, "reps": args.reps, "min_reps": args.min_reps,
          "max_seconds": args.max_seconds, "flush_mb": args.flush_mb})

    flush = torch.empty(args.flush_mb * 2 ** 20 // 4, dtype=torch.float32, device=dev) \
        if args.flush_mb > 0 else None
    for dname in args.dtypes.split():
        for (m, n, k) in shapes:
            case = {"kind": "case", "dtype": dname, "m": m, "n": n, "k": k, "layout": "nn"}
            if args.deadline_s and time.monotonic() - t_start > args.deadline_s:
                case.update(status="skipped", error="deadline of %.0f s passed" % args.deadline_s)
                emit(case)
                continue
            if dname not in DTYPES:
                case.update(status="error", error="unknown dtype %r" % dname)
                emit(case)
                continue
            a = b = c = None
            try:
                dt = getattr(torch, DTYPES[dname])
                a = torch.randn(m, k, dtype=dt, device=dev)
                b = torch.randn(k, n, dtype=dt, device=dev)
                c = torch.empty(m, n, dtype=dt, device=dev)
                t0 = time.monotonic()
                for _ in range(max(args.warmup, 1)):
                    torch.matmul(a, b, out=c)
                torch.cuda.synchronize()
                warm_s = time.monotonic() - t0
                times = []
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                while len(times) < args.reps:
                    if flush is not None:
                        flush.zero_()  # writes flush_mb MB: evicts A, B and C from L2
                    start.record()
                    torch.matmul(a, b, out=c)
                    end.record()
                    end.synchronize()
                    times.append(start.elapsed_time(end))  # ms
                    if len(times) >= args.min_reps and sum(times) / 1e3 > args.max_seconds:
                        break
                med = statistics.median(times)
                flop = 2.0 * m * n * k
                # a cheap sanity check of one output element against a float64 dot product
                i, j = m // 2, n // 2
                ref = float((a[i, :].double() * b[:, j].double()).sum())
                got = float(c[i, j].double())
                scale = float((a[i, :].double().abs() * b[:, j].double().abs()).sum()) or 1.0
                case.update(status="ok", median_ms=med, min_ms=min(times), max_ms=max(times),
                            reps=len(times), warmup=max(args.warmup, 1),
                            warmup_s=round(warm_s, 4),
                            gflops=flop / (med * 1e6), tflops=flop / (med * 1e9),
                            probe_rel_error=abs(got - ref) / scale,
                            stdev_ms=statistics.pstdev(times) if len(times) > 1 else 0.0)
            except Exception as e:  # noqa: BLE001 - one failed case must not stop the rest
                case.update(status="error", error="%s: %s" % (type(e).__name__, str(e)[:300]))
            finally:
                del a, b, c
                torch.cuda.empty_cache()
            emit(case)
    for a in attn:
        case = dict(a, kind="attention", dtype=args.attn_dtype)
        if args.deadline_s and time.monotonic() - t_start > args.deadline_s:
            case.update(status="skipped", error="deadline of %.0f s passed" % args.deadline_s)
        else:
            case.update(time_attention(torch, dev, a, args, flush))
        emit(case)
    return 0


def parse_attention(spec):
    """B,H,G,S,S2,D,C -> dict; ValueError names what is wrong."""
    try:
        b, h, g, s, s2, d, c = (int(x) for x in spec.split(","))
    except ValueError:
        raise ValueError("attention spec %r is not B,H,G,S,S2,D,C" % spec)
    if min(b, h, g, s, s2, d) < 1 or h % g or c not in (0, 1):
        raise ValueError("attention spec %r: sizes >= 1, H %% G == 0, causal 0 or 1" % spec)
    if c and s != s2:
        raise ValueError("attention spec %r: causal with seq != seq_kv (flash takes no "
                         "bottom-right mask)" % spec)
    return {"batch": b, "heads": h, "kv_heads": g, "seq": s, "seq_kv": s2, "head_dim": d,
            "causal": bool(c)}


def time_attention(torch, dev, a, args, flush):
    """One SDPA case under the flash backend (efficient for grouped-query heads when flash
    refuses them): the fields of the case's JSON line."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    b, h, g, s, s2, d = (a[k] for k in ("batch", "heads", "kv_heads", "seq", "seq_kv",
                                         "head_dim"))
    dt = getattr(torch, DTYPES[args.attn_dtype])
    q = k = v = o = None
    try:
        q = torch.randn(b, s, h, d, dtype=dt, device=dev).transpose(1, 2)
        k = torch.randn(b, s2, g, d, dtype=dt, device=dev).transpose(1, 2)
        v = torch.randn(b, s2, g, d, dtype=dt, device=dev).transpose(1, 2)
        tries = [(SDPBackend.FLASH_ATTENTION, "-" if g == h else "enable_gqa")]
        if g != h:
            tries += [(SDPBackend.EFFICIENT_ATTENTION, "enable_gqa"),
                      (SDPBackend.EFFICIENT_ATTENTION, "expanded")]
        errors = []
        for backend, gqa in tries:
            kk, vv, kw = k, v, {"is_causal": a["causal"]}
            if gqa == "enable_gqa":
                kw["enable_gqa"] = True
            elif gqa == "expanded":
                kk = k.repeat_interleave(h // g, dim=1)
                vv = v.repeat_interleave(h // g, dim=1)
            try:
                with sdpa_kernel(backend):
                    o = F.scaled_dot_product_attention(q, kk, vv, **kw)
                    torch.cuda.synchronize()
                    t0 = time.monotonic()
                    for _ in range(max(args.warmup, 1)):
                        F.scaled_dot_product_attention(q, kk, vv, **kw)
                    torch.cuda.synchronize()
                    warm_s = time.monotonic() - t0
                    times = []
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    while len(times) < args.reps:
                        if flush is not None:
                            flush.zero_()
                        start.record()
                        F.scaled_dot_product_attention(q, kk, vv, **kw)
                        end.record()
                        end.synchronize()
                        times.append(start.elapsed_time(end))
                        if len(times) >= args.min_reps and sum(times) / 1e3 > args.max_seconds:
                            break
            except RuntimeError as e:
                errors.append("%s/%s: %s" % (backend.name, gqa, str(e).splitlines()[0][:200]))
                continue
            # one row of the last (batch, head) in float64 (causal: S == S2, the diagonal)
            i, bi, hi = s - 1, b - 1, h - 1
            qr = q[bi, hi, i].double()
            kh, vh = k[bi, hi // (h // g)].double(), v[bi, hi // (h // g)].double()
            n = i + 1 if a["causal"] else s2
            p = ((kh[:n] @ qr) / d ** 0.5).softmax(0)
            ref, mag = p @ vh[:n], p @ vh[:n].abs()
            err = float(((o[bi, hi, i].double() - ref).abs() / mag.clamp(min=1e-30)).max())
            med = statistics.median(times)
            pairs = s * s2 - s * (s - 1) // 2 if a["causal"] else s * s2
            flop = 4.0 * d * b * h * pairs
            return {"status": "ok", "backend": backend.name, "gqa": gqa, "median_ms": med,
                    "min_ms": min(times), "max_ms": max(times), "reps": len(times),
                    "warmup_s": round(warm_s, 4), "tflops": flop / (med * 1e9),
                    "gflops": flop / (med * 1e6), "probe_rel_error": err,
                    "refused": errors}
        return {"status": "error", "error": "; ".join(errors)}
    except Exception as e:  # noqa: BLE001 - one failed case must not stop the rest
        return {"status": "error", "error": "%s: %s" % (type(e).__name__, str(e)[:300])}
    finally:
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
