"""autotune.torch: torch.matmul with autotune's tuned kernels, on PyTorch tensors.

    import torch, autotune.torch
    c = autotune.torch.matmul(a, b)       # as torch.matmul(a, b)

CUDA tensors: the kernel runs on the tensors' own memory (their data pointers) on PyTorch's
current stream, in PyTorch's context (the device's primary context, handed to the library as
at_context_options.native_context); C is a new tensor from PyTorch's allocator. CPU tensors:
the kernel runs on the library's default device (OpenCL, PoCL on a machine without a GPU)
through its own buffers, copies in and out: for trying it out, not for speed.

The first call of a shape tunes it (at_get with AT_GET_ALLOW_TUNE, as PyTorch TunableOp does:
AUTOTUNE_TUNING=0 answers from the databases' fallback chain instead, AUTOTUNE_BUDGET sets the
budget, AUTOTUNE_DB_READONLY=1 never writes); later calls in the process take the kernel from
memory. What the library's GEMM does not cover goes to torch.matmul unchanged: tensors that
are not both 2-D (batched, vectors), other dtypes than float32/float16/bfloat16 (bfloat16 not
on the CPU path), mixed dtypes or devices, an empty dimension, and inputs that need gradients
while autograd records. stats() counts both.
"""

import ctypes
import threading

import numpy as np
import torch

import autotune

from . import _lib
from ._lib import lib

__all__ = ["matmul", "stats"]

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

_lock = threading.Lock()
_contexts = {}  # torch device index -> autotune.Context on PyTorch's CUDA context
_kernels = {}  # (device, m, n, k, dtype, layout) -> autotune.Kernel
_stats = {"autotune": 0, "torch": 0}


def stats():
    """How many calls ran autotune's kernel and how many went to torch.matmul."""
    return dict(_stats)


class _Cuda:
    """The CUDA driver, for PyTorch's context: the device's primary context, retained."""

    lib = None

    @classmethod
    def primary_context(cls, ordinal):
        if cls.lib is None:
            cls.lib = ctypes.CDLL("libcuda.so.1")
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        for call in (lambda: cls.lib.cuDeviceGet(ctypes.byref(dev), ordinal),
                     lambda: cls.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)):
            code = call()
            if code != 0:
                raise autotune.Error(-4,  # AT_ERR_NO_DEVICE
                                     f"CUDA driver error {code} getting device {ordinal}'s context")
        return ctx


def _context(device):
    """The autotune context for a tensor's device: PyTorch's own CUDA context, or the default
    context for CPU tensors."""
    if device.type == "cpu":
        return autotune._context(None)
    index = device.index if device.index is not None else torch.cuda.current_device()
    ctx = _contexts.get(index)
    if ctx is None:
        torch.cuda.current_stream(index)  # PyTorch has made the primary context by then
        native = _Cuda.primary_context(index)
        ctx = autotune.Context(backend="cuda", device=-1, native_context=native.value)
        _contexts[index] = ctx
    return ctx


def _operand(x):
    """(tensor, transposed) with the tensor's memory row-major and packed, as the kernel reads
    it: a transposed view of a packed matrix is read as is ("t"), anything else is copied. A
    pointer not aligned to 16 bytes (a view from an odd offset) is copied too: vector loads."""
    if x.stride(1) == 1 and x.stride(0) == x.shape[1]:
        t = False
    elif x.stride(0) == 1 and x.stride(1) == x.shape[0]:
        t = True
    else:
        x, t = x.contiguous(), False
    if x.data_ptr() % 16:
        x, t = x.contiguous(), False
    return x, t


def _covered(a, b, out):
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or 0 in (*a.shape, b.shape[1]):
        return False
    if a.dtype != b.dtype or a.dtype not in _DTYPES or a.device != b.device:
        return False
    if a.device.type not in ("cuda", "cpu") or (a.device.type == "cpu" and a.dtype == torch.bfloat16):
        return False
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return False
    if out is not None and (out.shape != (a.shape[0], b.shape[1]) or out.dtype != a.dtype
                            or out.device != a.device or not out.is_contiguous()
                            or out.data_ptr() % 16):
        return False
    return True


def _kernel(ctx, device, m, n, k, dtype, layout):
    key = (str(device), m, n, k, dtype, layout)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel, _ = autotune.get(m, n, k, dtype=dtype, layout=layout, ctx=ctx, allow_tune=True)
        _kernels[key] = kernel
    return kernel


def matmul(a, b, *, out=None):
    """a @ b as torch.matmul(a, b, out=out), by autotune's tuned GEMM where it covers the call
    (module docstring), else by torch.matmul."""
    if not _covered(a, b, out):
        _stats["torch"] += 1
        return torch.matmul(a, b, out=out) if out is not None else torch.matmul(a, b)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    a, ta = _operand(a)
    b, tb = _operand(b)
    layout = ("t" if ta else "n") + ("t" if tb else "n")
    dtype = _DTYPES[a.dtype]
    with _lock:  # the context's calls are thread-safe; this module's dictionaries are not
        ctx = _context(a.device)
        kernel = _kernel(ctx, a.device, m, n, k, dtype, layout)
    if a.device.type == "cpu":
        # The operands as stored: a transposed one is its packed (k, m) / (n, k) memory.
        stored = [(x.t() if t else x).numpy() for x, t in ((a, ta), (b, tb))]
        c = torch.from_numpy(np.ascontiguousarray(kernel(*stored)))
        _stats["autotune"] += 1
        if out is None:
            return c
        return out.copy_(c)
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    ptrs = (_lib.DevPtr * 3)(*(_lib.DevPtr(x.data_ptr()) for x in (a, b, c)))
    # PyTorch's default stream is CUDA's legacy stream, handle 0, which the library would read
    # as "the context's own stream": name it CU_STREAM_LEGACY (0x1) instead.
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream or 0x1)
    ctx.check(lib.at_kernel_launch(kernel._live(), ptrs, 3, stream))
    _stats["autotune"] += 1
    return c
