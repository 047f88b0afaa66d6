"""ctypes declarations of include/autotune.h for the shared library shipped in this package."""

import ctypes
import os
from ctypes import (
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint,
    c_uint64,
    c_void_p,
)

# at_status, in the header's order; a test compares this list with include/autotune.h.
STATUS_NAMES = {
    0: "AT_OK",
    -1: "AT_ERR_INVALID_ARG",
    -2: "AT_ERR_NO_MEMORY",
    -3: "AT_ERR_NO_BACKEND",
    -4: "AT_ERR_NO_DEVICE",
    -5: "AT_ERR_COMPILE",
    -6: "AT_ERR_LAUNCH",
    -7: "AT_ERR_DB",
    -8: "AT_ERR_DB_CORRUPT",
    -9: "AT_ERR_DB_VERSION",
    -10: "AT_ERR_NOT_FOUND",
    -11: "AT_ERR_TEMPLATE",
    -12: "AT_ERR_IO",
    -13: "AT_ERR_UNSUPPORTED",
    -14: "AT_ERR_NO_VALID_CONFIG",
    -15: "AT_ERR_INTERNAL",
    -16: "AT_ERR_INTERRUPTED",
    -17: "AT_ERR_DEVICE_LOST",
}
BACKENDS = {None: 0, "auto": 0, "cuda": 1, "hip": 2, "opencl": 3}
GET_ALLOW_TUNE, GET_NO_FALLBACK = 1, 2


class ContextOptions(Structure):
    _fields_ = [
        ("backend", c_int),
        ("device", c_int),
        ("db_path", c_char_p),
        ("compile_threads", c_int),
        ("db_search_path", c_char_p),
        ("native_context", c_void_p),
        ("native_queue", c_void_p),
        ("reserved", c_void_p * 5),
    ]


ProgressFn = ctypes.CFUNCTYPE(None, c_void_p, c_int64, c_int64, c_double, c_double, c_double)


class TransferSource(Structure):
    _fields_ = [
        ("name", c_char * 512),
        ("used", c_int),
        ("reason", c_char * 256),
        ("configs", c_int64),
        ("pairs", c_int64),
        ("weight", c_double),
    ]


TRANSFER_MAX = 5  # AT_TRANSFER_MAX


class TuneOptions(Structure):
    _fields_ = [
        ("strategy", c_char_p),
        ("max_evals", c_int64),
        ("max_seconds", c_double),
        ("seed", c_uint64),
        ("force", c_int),
        ("progress", ProgressFn),
        ("progress_user", c_void_p),
        ("cancel", POINTER(c_int)),
        ("no_improve", c_int64),
        ("replay_db", c_char_p),
        ("template_name", c_char_p),
        ("run_limit_s", c_double),
        ("slowdown_limit", c_double),
        ("on_candidate", c_void_p),
        ("no_proxy", c_int),
        ("no_transfer", c_int),
        ("transfer", POINTER(c_char_p)),
        ("ntransfer", c_size_t),
        ("transfer_out", POINTER(TransferSource)),
        ("reserved", c_void_p * 1),
    ]


class TuneReport(Structure):
    _fields_ = [
        ("space", c_int64),
        ("space_total", c_int64),
        ("evaluated", c_int64),
        ("measured", c_int64),
        ("failed", c_int64),
        ("cache_hit", c_int),
        ("best_time_us", c_double),
        ("best_gflops", c_double),
        ("best_max_rel_error", c_double),
        ("best_config", c_char * 512),
        ("seconds", c_double),
        ("template_name", c_char * 64),
        ("best_gbytes_per_s", c_double),
        ("seeds", c_int64),
        ("budget_s", c_double),
        ("overrun_s", c_double),
        ("estimate_s", c_double),
        ("budget_stopped", c_int64),
        ("slow_stopped", c_int64),
        ("proxy_problem", c_char * 48),
        ("proxy_evaluated", c_int64),
        ("proxy_confirmed", c_int64),
        ("transfer_sources", c_int32),
        ("first_picks_from_sources", c_int32),
        ("probe_picks", c_int64),
    ]


class LookupInfo(Structure):
    _fields_ = [
        ("source", c_int),
        ("database", c_char * 1024),
        ("device_key", c_char * 640),
        ("problem_key", c_char * 256),
        ("config", c_char * 512),
        ("template_name", c_char * 64),
        ("template_hash", c_char * 17),
        ("time_us", c_double),
        ("validated", c_int),
        ("reserved", c_int64 * 8),
    ]


class DevPtr(Structure):
    _fields_ = [("handle", c_void_p)]


class ReplayReport(Structure):
    _fields_ = [
        ("format", c_char * 16),
        ("device", c_char * 256),
        ("kernel", c_char * 256),
        ("objective", c_char * 64),
        ("space", c_int64),
        ("space_failed", c_int64),
        ("evaluated", c_int64),
        ("failed", c_int64),
        ("optimum", c_double),
        ("optimum_config", c_char * 512),
        ("found", c_int),
        ("best", c_double),
        ("best_config", c_char * 512),
        ("simulated_seconds", c_double),
        ("seconds", c_double),
        ("ntrajectory", c_size_t),
        ("trajectory_evals", POINTER(c_int64)),
        ("trajectory_best", POINTER(c_double)),
        ("ntransfer", c_size_t),
        ("transfer", POINTER(TransferSource)),
        ("first_picks_from_sources", c_int64),
        ("probe_picks", c_int64),
        ("reserved", c_int64 * 4),
    ]


class DbCount(Structure):
    _fields_ = [
        ("name", c_char * 640),
        ("results_ok", c_int64),
        ("results_failed", c_int64),
        ("best", c_int64),
    ]


class DbStats(Structure):
    _fields_ = [
        ("total", DbCount),
        ("ops", POINTER(DbCount)),
        ("devices", POINTER(DbCount)),
        ("templates", POINTER(DbCount)),
        ("nops", c_size_t),
        ("ndevices", c_size_t),
        ("ntemplates", c_size_t),
        ("reserved", c_int64 * 8),
    ]


VisitFn = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_char_p)

P = c_void_p  # opaque handles: at_context*, at_problem*, at_kernel*, at_buffer*
# name: (result type, argument types); the result c_int is an at_status.
_SIGNATURES = {
    "at_version": (c_char_p, []),
    "at_strerror": (c_char_p, [c_int]),
    "at_source_name": (c_char_p, [c_int]),
    "at_context_create": (c_int, [POINTER(ContextOptions), POINTER(P)]),
    "at_context_destroy": (None, [P]),
    "at_context_last_error": (c_char_p, [P]),
    "at_context_backend": (c_char_p, [P]),
    "at_context_device_name": (c_char_p, [P]),
    "at_context_device_key": (c_char_p, [P]),
    "at_context_database": (c_char_p, [P, c_size_t]),
    "at_context_synchronize": (c_int, [P]),
    "at_problem_create": (c_int, [c_char_p, POINTER(P)]),
    "at_problem_set": (c_int, [P, c_char_p, c_char_p]),
    "at_problem_get": (c_int, [P, c_char_p, c_char_p, c_size_t]),
    "at_problem_key": (c_int, [P, c_char_p, c_size_t]),
    "at_problem_last_error": (c_char_p, []),
    "at_problem_destroy": (None, [P]),
    "at_tune": (c_int, [P, P, POINTER(TuneOptions), POINTER(TuneReport), POINTER(P)]),
    "at_get": (c_int, [P, P, c_uint, POINTER(P), POINTER(c_int)]),
    "at_kernel_info": (c_int, [P, POINTER(LookupInfo)]),
    "at_kernel_config": (c_char_p, [P]),
    "at_kernel_template": (c_char_p, [P]),
    "at_kernel_launch": (c_int, [P, POINTER(DevPtr), c_size_t, c_void_p]),
    "at_kernel_destroy": (None, [P]),
    "at_buffer_create": (c_int, [P, c_size_t, POINTER(P)]),
    "at_buffer_write": (c_int, [P, c_size_t, c_void_p, c_size_t]),
    "at_buffer_read": (c_int, [P, c_size_t, c_void_p, c_size_t]),
    "at_buffer_devptr": (DevPtr, [P]),
    "at_buffer_destroy": (None, [P]),
    "at_tune_strategies": (POINTER(c_char_p), []),
    "at_db_default_location": (c_void_p, []),  # malloc'd char*: read, then free
    "at_db_visit": (c_int, [c_char_p, c_char_p, c_char_p, VisitFn, c_void_p, c_char_p, c_size_t]),
    "at_db_stats_read": (c_int, [c_char_p, POINTER(DbStats), c_char_p, c_size_t]),
    "at_db_stats_clear": (None, [POINTER(DbStats)]),
    "at_replay_file": (
        c_int,
        [c_char_p, c_char_p, POINTER(TuneOptions), POINTER(ReplayReport), c_char_p, c_size_t],
    ),
    "at_replay_report_clear": (None, [POINTER(ReplayReport)]),
}


def _load():
    # The library CMake installed into this package's folder (pyproject.toml, CMakeLists.txt).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libautotune.so.0")
    lib = ctypes.CDLL(path)
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


lib = _load()
libc = ctypes.CDLL(None)
libc.free.argtypes, libc.free.restype = [c_void_p], None


def text(b):
    """A C string (bytes or None) as str."""
    return b.decode("utf-8", "replace") if b is not None else ""


def names(arr):
    """A NULL-terminated char*[] as a list of str."""
    out, i = [], 0
    while arr[i] is not None:
        out.append(text(arr[i]))
        i += 1
    return out
