cc -O2 -std=c11 -Wall benchmarks/pocl/peers.c -o OUTDIR/peers -lclblast -lOpenCL -lopenblas -lm
