/* instance.cpp — one configuration of templates/attention/attention_mma.cu (tuning parameters and
 * problem defines given as -D by tests/CMakeLists.txt) compiled for the host emulator, registered
 * with the test. */
#include "emu.h"
#include "registry.h"

#include "templates/attention/attention_mma.cu"

namespace
{

void block_body(void *arg)
{
    const at_attn_args &a = *(const at_attn_args *)arg;
    attention_mma(a.Q, a.K, a.V, a.O, a.LSE, a.heads, a.kv_heads, a.seq, a.seq_kv, a.scale, a.q_sb,
                  a.q_sh, a.q_ss, a.kv_sb, a.kv_sh, a.kv_ss
#if SPLIT > 1
                  ,
                  a.ws
#endif
    );
}

/* The grid's blocks one after another, in launch order (x fastest). */
void run(const at_attn_args &a)
{
    const int groups[3] = {(a.seq + BQ - 1) / BQ * a.batch * a.heads, SPLIT, 1};
    at_emu::block b;
    b.smem.resize(2 * BQ * HEAD_DIM + 4 * STAGES * BKV * HEAD_DIM + 16); /* + 16: see emu.h */
    b.bar = at_emu::barrier(THREADS);
    b.warps.resize(WARPS);
    for (int z = 0; z < groups[2]; z++)
        for (int y = 0; y < groups[1]; y++)
            for (int x = 0; x < groups[0]; x++) {
                /* 0xffff is NaN in f16 and bf16: unwritten shared memory shows */
                std::fill(b.smem.begin(), b.smem.end(), (unsigned char)0xff);
                b.group[0] = x, b.group[1] = y, b.group[2] = z;
                for (int d = 0; d < 3; d++) b.groups[d] = groups[d];
                if (!at_emu::run_block(b, THREADS, block_body, (void *)&a)) return;
            }
}

/* attention_mma.yaml's workspace: expression */
long ws_bytes(int batch, int heads, int seq)
{
    return SPLIT > 1 ? (long)batch * heads * ((seq + BQ - 1) / BQ) *
                           ((long)SPLIT * BQ * (HEAD_DIM + 8) + 1) * 4
                     : 0;
}

const at_attn_kernel self = {BQ,       BKV,    WARPS,  STAGES,  SWIZZLE, QREG, SPLIT,
                             HEAD_DIM, CAUSAL, EDGE_Q, EDGE_KV, DT,      run,  ws_bytes};
const bool registered = at_attn_register(&self);

} // namespace
