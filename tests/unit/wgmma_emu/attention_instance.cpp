/* attention_instance.cpp — one configuration of templates/attention/attention_wgmma.cu (tuning
 * parameters and problem defines given as -D by tests/CMakeLists.txt) compiled for the host
 * emulator, registered with test_attention_wgmma_emu under a name made of its parameters. */
#include "emu.h"
#include "registry.h"

#include "templates/attention/attention_wgmma.cu"

namespace
{

void run(const at_emu_attn_args &a)
{
    const int groups[3] = {(a.seq + BQ - 1) / BQ, a.batch * a.heads, SPLIT};
    /* the splits of a query block arrive in the order z = 0, 1, ... or, with copies at issue,
     * the reverse, so the block that combines them is the last or the first split */
    const bool reverse = at_emu::copy_at_issue;
    at_emu::barrier bar(THREADS);
    at_emu::block b;
    /* the launch's bytes, + 16 static */
    b.smem.resize((BQ + 2 * STAGES * BKV) * HEAD_DIM * 2 + 1024 + 16);
    b.bar = &bar;
    b.collectives(THREADS);
    at_emu::run_threads(THREADS, [&](int t) {
        at_emu::tid = t;
        at_emu::blk = &b;
        for (int zz = 0; zz < groups[2]; zz++)
            for (int y = 0; y < groups[1]; y++)
                for (int x = 0; x < groups[0]; x++) {
                    if (t == 0) {
                        /* 0xffff is NaN in f16 and bf16: unwritten shared memory shows */
                        std::fill(b.smem.begin(), b.smem.end(), (unsigned char)0xff);
                        b.group[0] = x, b.group[1] = y;
                        b.group[2] = reverse ? groups[2] - 1 - zz : zz;
                        for (int d = 0; d < 3; d++) b.groups[d] = groups[d];
                    }
                    bar.arrive_and_wait();
                    attention_wgmma(a.Q, a.K, a.V, a.O, a.LSE, a.heads, a.kv_heads, a.seq, a.seq_kv,
                                    a.scale, a.q_sb, a.q_sh, a.q_ss, a.kv_sb, a.kv_sh, a.kv_ss
#if SPLIT > 1
                                    ,
                                    a.ws
#endif
                    );
                    if (!at_emu::cp_groups.empty() || !at_emu::cp_open.empty() ||
                        !at_emu::mma_groups.empty() || !at_emu::mma_open.empty())
                        at_emu::violation("a thread left with copies or MMAs in flight");
                    at_emu::cp_groups.clear();
                    at_emu::mma_groups.clear();
                    at_emu::mma_open.clear();
                    bar.arrive_and_wait();
                }
    });
}

const at_emu_attn_kernel self = {BQ,     BKV,    STAGES, SPLIT,   HEAD_DIM,
                                 CAUSAL, EDGE_Q, DT,     OVERLAP, run};
const bool registered = at_emu_attn_register(&self);

} // namespace
