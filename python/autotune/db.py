"""Databases as plain Python objects: their entries (at_db_visit) and counts (at_db_stats_read)."""

import ctypes
import re

from . import _check, _lib
from ._lib import lib, text

# The parts of each table's key ("problem|device|..."), cache/keys.h.
KEY_PARTS = {
    "best": ("problem", "device"),
    "results": ("problem", "device", "template_hash", "config"),
    "checks": ("problem", "device", "template_hash", "config"),
    "devices": ("device",),
}
# Bare tokens that are text even when they look like numbers (cache/record.c: F_TOKEN).
_TOKENS = {"hash", "backend"}
_FIELD = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)')
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "r": "\r", "t": "\t"}


def _unquote(s):
    return re.sub(
        r"\\(x[0-9a-fA-F]{2}|.)",
        lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "x" else _ESCAPES[m.group(1)],
        s[1:-1],
    )


def _bare(name, v):
    if name not in _TOKENS:
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
    return v


def parse_record(value):
    """A record's text, 'v2 name=value name="text" ...', as a dict of its fields (numbers as
    int or float, quoted text unescaped); the record version is the field "version"."""
    version, _, rest = value.partition(" ")
    if not re.fullmatch(r"v\d+", version):
        raise ValueError(f"not a record: {value[:40]!r}")
    out = {"version": int(version[1:])}
    pos = 0
    while pos < len(rest.rstrip()):
        m = _FIELD.match(rest, pos)
        if not m:
            raise ValueError(f"bad field at {rest[pos:pos + 40]!r}")
        name, v = m.groups()
        out[name] = _unquote(v) if v.startswith('"') else _bare(name, v)
        pos = m.end()
    return out


def _path(path):
    return str(path).encode() if path is not None else None


def entries(path=None, table="best", prefix=None):
    """The entries of a table ("best", "results", "checks", "devices") of the database at path
    (None: the default) whose key starts with prefix: a list of dicts, each with "key", the
    key's parts (best: problem, device; results: also template_hash, config) and the record's
    fields (config, time_us, ... for best; status, median_us, ... for results)."""
    if table not in KEY_PARTS:
        raise ValueError(f"table {table!r}: one of {', '.join(KEY_PARTS)}")
    out, failed = [], []

    def visit(user, key, value):
        try:
            k = text(key)
            e = {"key": k}
            e.update(zip(KEY_PARTS[table], k.split("|", len(KEY_PARTS[table]) - 1)))
            e.update(parse_record(text(value)))
            out.append(e)
            return 0
        except Exception as exc:  # raised below: an exception cannot cross the C call
            failed.append(exc)
            return 1

    why = ctypes.create_string_buffer(1024)
    cb = _lib.VisitFn(visit)  # kept alive through the call
    code = lib.at_db_visit(_path(path), table.encode(), prefix.encode() if prefix else None, cb,
                           None, why, len(why))
    if failed:
        raise failed[0]
    _check(code, lambda: text(why.value))
    return out


def _counts(arr, n):
    return {text(arr[i].name): _count(arr[i]) for i in range(n)}


def _count(c):
    return {"results_ok": c.results_ok, "results_failed": c.results_failed, "best": c.best}


def stats(path=None):
    """The records of the database at path (None: the default) counted (at_db_stats_read):
    {"total": {...}, "ops": {name: {...}}, "devices": ..., "templates": ...}, each count a
    dict of results_ok, results_failed and best."""
    s = _lib.DbStats()
    why = ctypes.create_string_buffer(1024)
    _check(lib.at_db_stats_read(_path(path), ctypes.byref(s), why, len(why)), lambda: text(why.value))
    try:
        return {
            "total": _count(s.total),
            "ops": _counts(s.ops, s.nops),
            "devices": _counts(s.devices, s.ndevices),
            "templates": _counts(s.templates, s.ntemplates),
        }
    finally:
        lib.at_db_stats_clear(ctypes.byref(s))


def default_location():
    """The database used when none is given (at_db_default_location)."""
    p = lib.at_db_default_location()
    try:
        return ctypes.string_at(p).decode() if p else None
    finally:
        _lib.libc.free(p)
