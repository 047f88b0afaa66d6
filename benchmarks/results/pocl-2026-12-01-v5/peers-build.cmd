cc -O2 -std=c11 -Wall <repo>/benchmarks/pocl/peers.c -o <outdir>/peers -lclblast -lOpenCL -lopenblas -lm
