/* registry.h — how kernel instances of the attention_mma emulator test register themselves. */
#ifndef AT_MMA_EMU_REGISTRY_H
#define AT_MMA_EMU_REGISTRY_H

struct at_attn_args {
    const unsigned short *Q, *K, *V;
    unsigned short *O;
    float *LSE;
    int batch, heads, kv_heads, seq, seq_kv;
    float scale;
    long q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss;
    float *ws; /* zeroed split-KV workspace of ws_bytes, or nullptr */
};

struct at_attn_kernel {
    int bq, bkv, warps, stages, swizzle, qreg, split; /* tuning parameters */
    int d, causal, edge_q, edge_kv, dt;               /* problem defines */
    void (*run)(const at_attn_args &);
    long (*ws_bytes)(int batch, int heads, int seq); /* the YAML's workspace: expression */
};

bool at_attn_register(const at_attn_kernel *k);

#endif
