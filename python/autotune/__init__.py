"""autotune: tuned GEMM kernels from Python, over the C library shipped in this package.

    import autotune, numpy as np
    kernel, report = autotune.gemm(512, 512, 512, budget="20s")
    c = kernel(a, b)                      # NumPy float32 arrays in, C out
    kernel, info = autotune.get(512, 512, 512)   # later: from the database, no tuning

autotune.db reads databases, autotune.plot draws a search (matplotlib).
"""

import ctypes
import re
import weakref
from dataclasses import dataclass

import numpy as np

from . import _lib
from ._lib import lib, text

__version__ = text(lib.at_version())
__all__ = ["Error", "Context", "Kernel", "TuneReport", "Replay", "gemm", "get", "replay",
           "strategies", "db", "plot"]


class Error(Exception):
    """A failed library call: status is the at_status name ("AT_ERR_NOT_FOUND"), code its value,
    detail the library's detailed message (at_context_last_error and the like)."""

    def __init__(self, code, detail=""):
        self.code = code
        self.status = _lib.STATUS_NAMES.get(code, str(code))
        self.detail = detail
        msg = f"{self.status}: {text(lib.at_strerror(code))}"
        super().__init__(f"{msg}: {detail}" if detail else msg)


def _check(code, detail=lambda: ""):
    if code != 0:
        raise Error(code, detail())


def _b(s):
    return s.encode() if s is not None else None


def strategies():
    """The search strategies (at_tune_strategies); the first is the default."""
    return _lib.names(lib.at_tune_strategies())


class Context:
    """A backend, a device and a database (at_context_create). backend: None/"auto", "opencl",
    "cuda" or "hip"; db: the database directory (None: $AUTOTUNE_DB, then the user's cache).
    native_context, native_queue: the caller's own handles as integers or ctypes pointers
    (at_context_options: a cl_context and cl_command_queue, a CUcontext and CUstream, or None
    and a hipStream_t), with backend named and device their index or -1.
    A context manager; close() destroys it and the kernels made on it."""

    def __init__(self, backend=None, device=0, db=None, native_context=None, native_queue=None):
        if backend not in _lib.BACKENDS:
            raise ValueError(f"backend {backend!r}: one of auto, opencl, cuda, hip")
        opts = _lib.ContextOptions(backend=_lib.BACKENDS[backend], device=device)
        opts.db_path = _b(str(db)) if db is not None else None
        opts.native_context, opts.native_queue = native_context, native_queue
        handle = ctypes.c_void_p()
        code = lib.at_context_create(ctypes.byref(opts), ctypes.byref(handle))
        if code != 0:
            detail = text(lib.at_context_last_error(handle)) if handle else ""
            lib.at_context_destroy(handle)
            raise Error(code, detail)
        self._handle = handle
        self._kernels = weakref.WeakSet()

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("the context is closed")
        return self._handle

    def last_error(self):
        return text(lib.at_context_last_error(self.handle))

    def check(self, code):
        _check(code, self.last_error)

    @property
    def backend(self):
        return text(lib.at_context_backend(self.handle))

    @property
    def device_name(self):
        return text(lib.at_context_device_name(self.handle))

    @property
    def device_key(self):
        return text(lib.at_context_device_key(self.handle))

    @property
    def database(self):
        """The user's database (the first on the search path)."""
        return text(lib.at_context_database(self.handle, 0))

    @property
    def databases(self):
        """The search path: the user's database, then the read-only layers (the package's
        shipped databases last)."""
        out = []
        while lib.at_context_database(self.handle, len(out)) is not None:
            out.append(text(lib.at_context_database(self.handle, len(out))))
        return out

    def synchronize(self):
        self.check(lib.at_context_synchronize(self.handle))

    def close(self):
        if self._handle is not None:
            for k in list(self._kernels):
                k.close()
            lib.at_context_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


_default = None


def _context(ctx):
    """ctx, or the default context (auto backend, default database), opened on first use."""
    global _default
    if ctx is not None:
        return ctx
    if _default is None:
        _default = Context()
    return _default


class _Problem:
    """An at_problem of operation op with the given fields set (None: the default)."""

    def __init__(self, op, **fields):
        self.handle = ctypes.c_void_p()
        _check(lib.at_problem_create(_b(op), ctypes.byref(self.handle)), self._error)
        for name, value in fields.items():
            if value is not None:
                _check(lib.at_problem_set(self.handle, _b(name), _b(str(value))), self._error)

    @staticmethod
    def _error():
        return text(lib.at_problem_last_error())

    def get(self, field):
        buf = ctypes.create_string_buffer(256)
        _check(lib.at_problem_get(self.handle, _b(field), buf, len(buf)), self._error)
        return buf.value.decode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        lib.at_problem_destroy(self.handle)


def _gemm_problem(m, n, k, dtype, layout, alpha, beta):
    return _Problem("gemm", m=m, n=n, k=k, dtype=dtype, layout=layout, alpha=alpha, beta=beta)


_NUMPY_DTYPES = {"f32": np.float32, "f16": np.float16}  # bf16 has no NumPy type


class Kernel:
    """A tuned GEMM kernel (at_kernel). kernel(a, b[, c]) runs C = alpha*op(A)*op(B) + beta*C on
    NumPy arrays through the library's device buffers and returns C."""

    def __init__(self, ctx, handle, problem):
        self.ctx = ctx
        self._handle = handle
        self.m, self.n, self.k = (int(problem.get(f)) for f in "mnk")
        self.dtype, self.layout = problem.get("dtype"), problem.get("layout")
        self.beta = float(problem.get("beta"))
        ctx._kernels.add(self)

    @property
    def config(self):
        return text(lib.at_kernel_config(self._live()))

    @property
    def template(self):
        return text(lib.at_kernel_template(self._live()))

    def info(self):
        """Where the kernel's configuration came from (at_kernel_info) as a dict."""
        info = _lib.LookupInfo()
        self.ctx.check(lib.at_kernel_info(self._live(), ctypes.byref(info)))
        return _lookup_dict(info)

    def _live(self):
        if self._handle is None:
            raise ValueError("the kernel is closed")
        return self._handle

    def _operand(self, x, name, rows, cols):
        if self.dtype not in _NUMPY_DTYPES:
            raise TypeError(f"dtype {self.dtype} has no NumPy type")
        x = np.ascontiguousarray(x, dtype=_NUMPY_DTYPES[self.dtype])
        if x.shape != (rows, cols):
            raise ValueError(f"{name} has shape {x.shape}, the kernel needs ({rows}, {cols})")
        return x

    def __call__(self, a, b, c=None):
        m, n, k = self.m, self.n, self.k
        a = self._operand(a, "a", *((k, m) if self.layout[0] == "t" else (m, k)))
        b = self._operand(b, "b", *((n, k) if self.layout[1] == "t" else (k, n)))
        if c is None:
            if self.beta != 0:
                raise ValueError("beta is not 0: pass c")
            c = np.zeros((m, n), dtype=a.dtype)
        c = self._operand(c, "c", m, n).copy()
        bufs = [ctypes.c_void_p() for _ in range(3)]
        try:
            for buf, x in zip(bufs, (a, b, c)):
                self.ctx.check(lib.at_buffer_create(self.ctx.handle, x.nbytes, ctypes.byref(buf)))
                self.ctx.check(lib.at_buffer_write(buf, 0, x.ctypes.data, x.nbytes))
            ptrs = (_lib.DevPtr * 3)(*(lib.at_buffer_devptr(buf) for buf in bufs))
            self.ctx.check(lib.at_kernel_launch(self._live(), ptrs, 3, None))
            self.ctx.check(lib.at_buffer_read(bufs[2], 0, c.ctypes.data, c.nbytes))
            self.ctx.synchronize()
        finally:
            for buf in bufs:
                lib.at_buffer_destroy(buf)
        return c

    def close(self):
        if self._handle is not None:
            lib.at_kernel_destroy(self._handle)
            self._handle = None

    def __del__(self):
        # The context may be gone at exit; it destroys its kernels first when closed.
        if getattr(self, "_handle", None) is not None and self.ctx._handle is not None:
            self.close()

    def __repr__(self):
        return f"<autotune.Kernel gemm {self.m}x{self.n}x{self.k} {self.dtype} {self.layout} {self.config}>"


@dataclass
class TuneReport:
    """at_tune_report."""

    best_config: str
    best_time_us: float
    best_gflops: float
    best_gbytes_per_s: float
    best_max_rel_error: float
    evaluated: int
    measured: int
    failed: int
    space: int
    space_total: int
    cache_hit: bool
    template_name: str
    seeds: int
    seconds: float
    budget_s: float
    overrun_s: float
    estimate_s: float
    proxy_problem: str
    proxy_evaluated: int
    proxy_confirmed: int
    # The warm start (docs/search.md, "Transfer"): its sources, each {source, configs, pairs,
    # weight}; how many of the first 10 proposals were their best configs; how many proposals
    # the probe made around them.
    transfer: list
    first_picks_from_sources: int
    probe_picks: int


def _budget(budget):
    """(max_evals, max_seconds) from a budget as the command reads --budget: N evaluations
    (an int or "N") or "Ns" / "N.Ns" seconds; None: the library's default."""
    if budget is None:
        return 0, 0.0
    if isinstance(budget, int) and not isinstance(budget, bool):
        evals = budget
    else:
        m = re.fullmatch(r"(\d+)|(\d+(?:\.\d+)?)s", str(budget))
        if not m:
            raise ValueError(f"budget {budget!r}: N evaluations or Ns seconds (e.g. 90s)")
        if m.group(2):
            seconds = float(m.group(2))
            if not 0 < seconds <= 1e9:
                raise ValueError(f"budget {budget!r}: seconds out of range")
            return 0, seconds
        evals = int(m.group(1))
    if not 1 <= evals <= 10**9:
        raise ValueError(f"budget {budget!r}: at least one evaluation")
    return evals, 0.0


def _tune_options(budget, strategy, seed, force=False, template=None, replay_db=None):
    evals, seconds = _budget(budget)
    return _lib.TuneOptions(
        strategy=_b(strategy),
        max_evals=evals,
        max_seconds=seconds,
        seed=seed or 0,
        force=int(force),
        template_name=_b(template),
        replay_db=_b(replay_db),
    )


def _source_dict(t, key):
    d = {key: text(t.name), "configs": t.configs, "pairs": t.pairs}
    if key == "file":
        d["used"] = bool(t.used)
        if not t.used:
            d["reason"] = text(t.reason)
    if key == "source" or t.used:
        d["weight"] = t.weight
    return d


def gemm(m, n, k=None, dtype="f32", layout="nn", budget=None, strategy=None, seed=None,
         ctx=None, alpha=None, beta=None, force=False, template=None, no_transfer=False):
    """Tunes C = alpha*op(A)*op(B) + beta*C (k: default m) on ctx's device (None: a default
    context) with at_tune, stores the results in its database, and returns (Kernel, TuneReport).
    budget: N evaluations (int or "N") or "Ns" seconds, as the command's --budget. The search
    starts warm from related results in the databases (neighbouring shapes, this shape on
    devices of the family) unless no_transfer; TuneReport.transfer says which."""
    ctx = _context(ctx)
    opts = _tune_options(budget, strategy, seed, force, template)
    opts.no_transfer = int(no_transfer)
    sources = (_lib.TransferSource * _lib.TRANSFER_MAX)()
    opts.transfer_out = sources
    report = _lib.TuneReport()
    handle = ctypes.c_void_p()
    with _gemm_problem(m, n, k, dtype, layout, alpha, beta) as p:
        ctx.check(lib.at_tune(ctx.handle, p.handle, ctypes.byref(opts), ctypes.byref(report),
                              ctypes.byref(handle)))
        kernel = Kernel(ctx, handle, p)
    r = {f: getattr(report, f) for f in TuneReport.__dataclass_fields__ if f != "transfer"}
    r.update(best_config=text(report.best_config), template_name=text(report.template_name),
             cache_hit=bool(report.cache_hit), proxy_problem=text(report.proxy_problem),
             transfer=[_source_dict(sources[i], "source")
                       for i in range(min(report.transfer_sources, _lib.TRANSFER_MAX))])
    return kernel, TuneReport(**r)


def _lookup_dict(info):
    return {
        "source": text(lib.at_source_name(info.source)),
        "database": text(info.database),
        "device_key": text(info.device_key),
        "problem_key": text(info.problem_key),
        "config": text(info.config),
        "template_name": text(info.template_name),
        "template_hash": text(info.template_hash),
        "time_us": info.time_us,
        "validated": bool(info.validated),
    }


def get(m, n, k=None, dtype="f32", layout="nn", ctx=None, alpha=None, beta=None,
        allow_tune=False, no_fallback=False):
    """The kernel at_get finds for the problem: the tuned entry, else (allow_tune) tuned now,
    else (unless no_fallback) the nearest tuned shape ... the default config. Returns
    (Kernel, info): info is at_kernel_info as a dict (source as the command's JSON names it,
    at_source_name: "exact", "nearest-shape", "same-arch", "vendor", "default" or "tuned";
    database, config, time_us, ...)."""
    ctx = _context(ctx)
    flags = (_lib.GET_ALLOW_TUNE if allow_tune else 0) | (_lib.GET_NO_FALLBACK if no_fallback else 0)
    handle = ctypes.c_void_p()
    with _gemm_problem(m, n, k, dtype, layout, alpha, beta) as p:
        ctx.check(lib.at_get(ctx.handle, p.handle, flags, ctypes.byref(handle), None))
        kernel = Kernel(ctx, handle, p)
    return kernel, kernel.info()


@dataclass
class Replay:
    """at_replay_report: a search replayed on a recorded space. trajectory: (evaluations, best
    objective value then) at each improvement; objective names the recorded quantity ("time" in
    ms for Kernel Tuner files, "median_us" for autotune databases)."""

    path: str
    strategy: str
    format: str
    device: str
    kernel: str
    objective: str
    space: int
    space_failed: int
    evaluated: int
    failed: int
    optimum: float
    optimum_config: str
    found: bool
    best: float
    best_config: str
    simulated_seconds: float
    seconds: float
    trajectory: list
    # The warm start: its sources, each {file, used, reason (when not used), configs, pairs,
    # weight (when used)}; how many of the first 10 proposals were their best configs; how many
    # proposals the probe made around them (docs/search.md, "Transfer").
    transfer: list
    first_picks_from_sources: int
    probe_picks: int


def replay(path, strategy=None, budget=None, seed=None, select=None, no_improve=0, transfer=(),
           no_transfer=False):
    """Replays a search (at_replay_file) with strategy (None: the default), budget (N
    evaluations or "Ns" recorded seconds; None: until the space is exhausted) and seed against
    the recorded space at path: a Kernel Tuner cache JSON (.json, .json.gz) or an autotune
    database (select: a prefix of "problem|device|template hash" when it holds several).
    transfer: recordings of the same kernel on another device or shape to start warm from (as
    `autotune replay --transfer`); no_transfer: read them but do not use them."""
    opts = _tune_options(budget, strategy, seed)
    opts.no_improve = no_improve
    files = (ctypes.c_char_p * max(len(transfer), 1))(*[_b(str(f)) for f in transfer])
    opts.transfer, opts.ntransfer = files, len(transfer)
    opts.no_transfer = int(no_transfer)
    r = _lib.ReplayReport()
    why = ctypes.create_string_buffer(1024)
    code = lib.at_replay_file(_b(str(path)), _b(select), ctypes.byref(opts), ctypes.byref(r), why,
                              len(why))
    _check(code, lambda: text(why.value))
    try:
        fields = {f: getattr(r, f) for f in Replay.__dataclass_fields__
                  if f not in ("path", "strategy", "trajectory", "transfer")}
        for f, v in fields.items():
            if isinstance(v, bytes):
                fields[f] = text(v)
        fields["found"] = bool(r.found)
        traj = [(r.trajectory_evals[i], r.trajectory_best[i]) for i in range(r.ntrajectory)]
        sources = [_source_dict(r.transfer[i], "file") for i in range(r.ntransfer)]
        return Replay(path=str(path), strategy=strategy or strategies()[0], trajectory=traj,
                      transfer=sources, **fields)
    finally:
        lib.at_replay_report_clear(ctypes.byref(r))


from . import db, plot  # noqa: E402  (they use Error and the helpers above)
