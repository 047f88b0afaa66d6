#!/usr/bin/env python3
"""Time torch.matmul (cuBLAS / cuBLASLt) on the GEMM shapes of the GPU benchmark.

Usage: torch_bench.py [--dtypes "bf16 f16 f32"] [--shapes "MxNxK ..."] [--warmup 5]
                      [--reps 30] [--min-reps 5] [--max-seconds 1.0] [--flush-mb 256]
                      [--device 0] [--deadline-s S]

Problem: C[m,n] = A[m,k] @ B[k,n], all row-major (contiguous), output dtype = input dtype,
A and B filled with torch.randn. f32 runs with torch.backends.cuda.matmul.allow_tf32 = False
(and cudnn's too), so it is a true f32 GEMM, not TF32. Everything else is PyTorch's default
(recorded in the output: the reduced-precision-reduction flags for f16/bf16).

Timing per case: `--warmup` untimed calls, then repetitions; before each repetition a
`--flush-mb` MB buffer is written (zero_) so L2 (50 MB on H200) is cold, then one
torch.matmul(a, b, out=c) between two CUDA events. Repetitions go on until `--reps`, or until
the timed sum passes `--max-seconds` (never fewer than `--min-reps`). The median is reported
(min and max too).

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
    args = ap.parse_args()
    t_start = time.monotonic()

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
    shapes = [parse_shape(s) for s in args.shapes.split()]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
