/* registry.h — how kernel instances of the wgmma emulator test register themselves. */
#ifndef AT_WGMMA_EMU_REGISTRY_H
#define AT_WGMMA_EMU_REGISTRY_H

struct at_emu_args {
    int m, n, k;
    float alpha, beta;
    const unsigned short *A;
    int lda;
    const unsigned short *B;
    int ldb;
    unsigned short *C;
    int ldc;
    float *ws; /* zeroed split-K workspace, or nullptr */
};

struct at_emu_kernel {
    int bm, bn, bk, wn, wgs, stages, splitk, ta, tb, dt;
    void (*run)(const at_emu_args &);
};

bool at_emu_register(const at_emu_kernel *k);

#endif
