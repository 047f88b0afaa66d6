#!/usr/bin/env python3
"""hip_isa_loop.py — instructions per K step in the main loop of an AMDGPU code object.

Disassembles a code object (hipRTC's output, e.g. written by test_hip_gemm with
AT_HIP_OBJ_DIR set) with llvm-objdump, finds the K loops (overlapping spans of branches back to an earlier
address, holding an MFMA) and prints how many instructions each holds, by kind: global loads, LDS writes and reads by width, MFMAs, barriers, the rest.
The kernel's two K loops (16-byte and 16-bit staging) are two such loops. Used to measure template
changes without a GPU (docs/hip.md).

    scripts/hip_isa_loop.py [--mcpu gfx90a] OBJECT.co...

Needs llvm-objdump with the AMDGPU target ($LLVM_OBJDUMP, else llvm-objdump on PATH)."""
import collections
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^\s+(\S+)([^/]*)//\s*([0-9A-Fa-f]+):")
TARGET = re.compile(r"<\w+\+0x([0-9a-f]+)>")


def disassemble(path, mcpu):
    tool = os.environ.get("LLVM_OBJDUMP") or shutil.which("llvm-objdump")
    if not tool:
        sys.exit("hip_isa_loop.py: llvm-objdump not found (set LLVM_OBJDUMP)")
    out = subprocess.run([tool, "-d", f"--mcpu={mcpu}", path], capture_output=True, text=True,
                         check=True).stdout
    base, insns = None, []
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\w+)>:", line)
        if m:
            base = int(m.group(1), 16)
            continue
        m = LINE.match(line)
        if m and base is not None:
            addr = int(m.group(3), 16)
            t = TARGET.search(line)
            target = base + int(t.group(1), 16) if t and "branch" in m.group(1) else None
            insns.append((addr, m.group(1), target))
    return insns


def kind(op):
    if op.startswith("v_mfma"):
        return "mfma"
    for p in ("global_load", "buffer_load", "flat_load", "ds_write", "ds_read", "global_store",
              "scratch_", "s_barrier", "s_waitcnt", "v_perm", "v_cndmask"):
        if op.startswith(p):
            return op if p in ("global_load", "ds_write", "ds_read", "flat_load") else p
    return "other"


def main(argv):
    mcpu = "gfx90a"
    if len(argv) > 2 and argv[1] == "--mcpu":
        mcpu, argv = argv[2], argv[2:]
    for path in argv[1:]:
        insns = disassemble(path, mcpu)
        index = {a: i for i, (a, _, _) in enumerate(insns)}
        loops = [(index[t], i) for i, (a, op, t) in enumerate(insns)
                 if t is not None and t <= a and t in index]
        # A loop's blocks may branch back to its header from several places (and the compiler
        # may split the header): a K loop is the union of overlapping back-edge spans, kept when
        # it holds an MFMA. Everything inside a K loop is unrolled, so there is no nesting.
        inner = []
        for b, e in sorted(loops):
            if inner and b <= inner[-1][1]:
                inner[-1] = (inner[-1][0], max(e, inner[-1][1]))
            else:
                inner.append((b, e))
        inner = [(b, e) for b, e in inner
                 if any(op.startswith("v_mfma") for _, op, _ in insns[b:e + 1])]
        print(f"{os.path.basename(path)}: {len(insns)} instructions, {len(inner)} main loop(s)")
        for b, e in sorted(inner):
            c = collections.Counter(kind(op) for _, op, _ in insns[b:e + 1])
            body = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "other")
            print(f"  loop of {e - b + 1} instructions: {body}, other {c['other']}")


if __name__ == "__main__":
    main(sys.argv)
