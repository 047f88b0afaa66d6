cc -O2 -std=c11 -Wall /work/main/benchmarks/pocl/peers.c -o /tmp/bench-out/peers -lclblast -lOpenCL -lopenblas -lm
