/* registry.h — how kernel instances of the wgmma emulator tests register themselves: gemm_wgmma.cu
 * ones with test_wgmma_emu, attention_wgmma.cu ones with test_attention_wgmma_emu. */
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
    int sms;   /* a persistent kernel's grid: min(tiles, sms) blocks */
};

struct at_emu_kernel {
    int bm, bn, bk, wn, wgs, stages, splitk, ta, tb, dt, group_m, swap, load, persist, store;
    int cluster;
    int exact; /* compiled with EDGE_M = EDGE_N = EDGE_K = 0: whole tiles only */
    void (*run)(const at_emu_args &);
};

bool at_emu_register(const at_emu_kernel *k);

struct at_emu_attn_args {
    const unsigned short *Q, *K, *V;
    unsigned short *O;
    float *LSE;
    int batch, heads, kv_heads, seq, seq_kv;
    float scale;
    long q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss;
    float *ws; /* zeroed split-KV workspace, or nullptr */
};

struct at_emu_attn_kernel {
    int bq, bkv, stages, split, d, causal, edge, dt, overlap; /* edge: EDGE_Q = EDGE_KV */
    void (*run)(const at_emu_attn_args &);
};

bool at_emu_attn_register(const at_emu_attn_kernel *k);

#endif
