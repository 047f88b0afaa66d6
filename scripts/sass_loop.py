#!/usr/bin/env python3
"""sass_loop.py — compiles one configuration of a CUDA template for an architecture with nvcc
(the same ptxas NVRTC runs) and counts the SASS of its main loop: the instructions of the
innermost backward branch's body that contains a wgmma (HGMMA) or mma (HMMA), how many of them
are predicated, and the most frequent opcodes; plus registers and spills from ptxas -v.

    scripts/sass_loop.py templates/gemm/gemm_wgmma.cu -D BM=128 -D BN=256 ... [--arch sm_90a]

Used to measure template changes without a GPU (docs/cuda.md). Needs nvcc and cuobjdump
(CUDA toolkit, $CUDA_HOME or /usr/local/cuda; cuobjdump also from $CUOBJDUMP or PATH)."""
import argparse, collections, os, re, shutil, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("source")
ap.add_argument("-D", action="append", default=[], dest="defs")
ap.add_argument("--arch", default="sm_90a")
ap.add_argument("--top", type=int, default=12)
ap.add_argument("--dump", help="write the whole SASS here")
a = ap.parse_args()
cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with tempfile.TemporaryDirectory() as tmp:
    cubin = os.path.join(tmp, "k.cubin")
    cmd = [f"{cuda}/bin/nvcc", "-cubin", f"-arch={a.arch}", "-std=c++17", "-Xptxas=-v",
           "-include", os.path.join(root, "templates/common/cuda.h"), "-x", "cu", a.source,
           "-o", cubin] + [f"-D{d}" for d in a.defs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(p.stderr)
    for w in re.findall(r".*warning.*", p.stderr):
        print(w)  # C7515 (serialized wgmma) among others
    regs = re.search(r"Used (\d+) registers", p.stderr)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", p.stderr)
    objdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or f"{cuda}/bin/cuobjdump"
    sass = subprocess.run([objdump, "-sass", cubin], capture_output=True,
                          text=True, check=True).stdout
if a.dump:
    open(a.dump, "w").write(sass)
ins = []  # (address, predicated, opcode, text)
for line in sass.splitlines():
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*);", line)
    if m:
        ins.append((int(m.group(1), 16), bool(m.group(2)), m.group(3), m.group(3) + m.group(4)))
addr = {x[0]: i for i, x in enumerate(ins)}
loops = []
for i, (ad, pred, op, text) in enumerate(ins):
    if op.startswith("BRA"):
        mm = re.search(r"0x([0-9a-f]+)", text)
        if mm and int(mm.group(1), 16) < ad and int(mm.group(1), 16) in addr:
            j = addr[int(mm.group(1), 16)]
            body = ins[j : i + 1]
            if any(b[2].startswith(("HGMMA", "HMMA")) for b in body):
                loops.append(body)
if not loops:
    sys.exit("no loop with HGMMA/HMMA found")
body = min(loops, key=len)
ops = collections.Counter(b[2].split(".")[0] for b in body)
print(f"registers {regs.group(1) if regs else '?'}, spill stores {spill.group(1) if spill else '?'}"
      f" loads {spill.group(2) if spill else '?'}; total SASS {len(ins)}")
print(f"main loop: {len(body)} instructions, {sum(b[1] for b in body)} predicated, "
      f"{ops.get('HGMMA', 0) + ops.get('HMMA', 0)} MMA")
print("  " + ", ".join(f"{k} {v}" for k, v in ops.most_common(a.top)))
