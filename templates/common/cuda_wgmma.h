/* cuda_wgmma.h — Hopper (sm_90a) warpgroup MMA for the CUDA templates: the wgmma.mma_async
 * wrappers (both operands from shared memory, or A from registers), their fences, and the
 * canonical swizzled shared-memory layouts with their matrix descriptors; shared by
 * gemm_wgmma.cu and attention_wgmma.cu. Needs AT_MMA_TYPE (cuda_f16.h) and at_saddr
 * (cuda_async.h) included first.
 *
 * Shared-memory layouts (PTX ISA "Shared Memory Matrix Layout", CUTLASS cute
 * GMMA::Layout_{K,MN}_SW{64,128}_Atom). Swizzling is the hardware's: in every SW-byte swizzle
 * atom (SW = 128 or 64), byte address bits [4, 4+log2(SW/16)) are XORed with bits [7, ...):
 * phys = addr ^ (((addr >> 7) & (SW/16 - 1)) << 4), on 1024-byte aligned atoms.
 *   K-major tile of ROWS rows (M or N) by K: each row holds KSW consecutive k (KSW*2 = SW
 *     bytes); the column blocks of KSW k follow one another, ROWS*KSW*2 bytes each.
 *     Descriptor: start = tile + (k0/KSW)*ROWS*KSW*2 + row0*SW + (k0%KSW)*2, SBO = 8*SW (the
 *     next 8 rows), LBO unused (16), swizzle SW; transpose bit 0.
 *   MN-major tile of KROWS rows (k) by MN: blocks of 64 MN columns, each KROWS rows of 128
 *     bytes; 128B swizzle. Descriptor: start = tile + (mn0/64)*KROWS*128 + k0*128,
 *     LBO = KROWS*128 (the next 64 columns), SBO = 1024 (the next 8 k); transpose bit 1.
 *
 * Register fragments (PTX ISA "Register Fragments and Shared Memory Matrix Layouts" for wgmma
 * .m64nNk16; CUTLASS cute GMMA::CLayout_64xN and GMMA::ALayout_64x16, whose thread-value
 * strides are the same): thread t of the warpgroup, lane l = t % 32, warp w = t / 32, holds
 *   D (f32, N/2 registers): register r is row 16w + l/4 + 8((r/2)%2), column 8(r/4) + 2(l%4) + r%2;
 *   A (16-bit, 4 registers of two halves): half v (register v/2, low half when v is even) is
 *     row 16w + l/4 + 8((v/2)%2), column 8(v/4) + 2(l%4) + v%2.
 * So the halves of A are, in order, the registers 0..7 of a D fragment: the f32 registers
 * 8j..8j+7 of an m64 x N result, rounded and packed in pairs, are the A operand of columns
 * 16j..16j+15 (what attention_wgmma.cu does with P).
 *
 * A host emulation defines AT_PTX_EMULATE and its own at_fence_proxy_async, at_wgmma_fence,
 * at_wgmma_commit, at_wgmma_wait, at_fence_reg, at_wgmma and at_wgmma_rs before including a
 * template (tests/unit/wgmma_emu/emu.h); the layout and descriptor functions run unchanged. */
#ifndef AT_CUDA_WGMMA_H
#define AT_CUDA_WGMMA_H

typedef unsigned long long at_desc; /* a wgmma matrix descriptor */

/* ---- PTX primitives -------------------------------------------------------------------------- */
#ifndef AT_PTX_EMULATE
/* Generic-proxy shared-memory writes (cp.async, st.shared) of this thread become visible to
 * the async proxy, which wgmma reads shared memory through. */
INLINE void at_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

INLINE void at_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
INLINE void at_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> INLINE void at_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving accesses of an accumulator register across the wgmma
 * fence/wait around it (it does not know the asynchronous MMA writes it); on a register-A
 * operand after the wait, keeps its value live (unchanged) until the MMA has read it. */
INLINE void at_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
INLINE void at_fence_reg(unsigned &r) { asm volatile("" : "+r"(r)::"memory"); }

/* the accumulator operands "+f"(d[0]) .. "+f"(d[N/2-1]) */
#define AT_ACC8(i)                                                                                 \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define AT_ACC32(i) AT_ACC8(i), AT_ACC8(i + 8), AT_ACC8(i + 16), AT_ACC8(i + 24)
#define AT_ACC_16   AT_ACC8(0)
#define AT_ACC_32   AT_ACC8(0), AT_ACC8(8)
#define AT_ACC_64   AT_ACC32(0)
#define AT_ACC_128  AT_ACC_64, AT_ACC32(32)
#define AT_ACC_256  AT_ACC_128, AT_ACC32(64), AT_ACC32(96)
/* ... and their numbers in the instruction's register list */
#define AT_REGS_16 "%0, %1, %2, %3, %4, %5, %6, %7"
#define AT_REGS_32 AT_REGS_16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define AT_REGS_64                                                                                 \
    AT_REGS_32 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define AT_REGS_128                                                                                \
    AT_REGS_64                                                                                     \
    ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "           \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define AT_REGS_256                                                                                \
    AT_REGS_128                                                                                    \
    ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "           \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "             \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, "   \
    "%127"

/* d (m64 x N f32 fragment) = A(64x16, descriptor da) * B(16xN, descriptor db) (+ d when acc_in);
 * TRA = 1: A is M-major, TRB = 1: B is N-major (the instruction's transpose immediates).
 * Asm operands %0 .. %(N/2-1) are the N/2 accumulators, then da, db, acc_in, TRA, TRB. */
#define AT_WGMMA_SS(N, A, B, P, TI_A, TI_B)                                                        \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." AT_MMA_TYPE "." AT_MMA_TYPE     \
                 "\n{" AT_REGS_##N "}, %" #A ", %" #B ", p, 1, 1, %" #TI_A ", %" #TI_B ";\n}\n"    \
                 : AT_ACC_##N                                                                      \
                 : "l"(da), "l"(db), "r"(acc_in), "n"(TRA), "n"(TRB))
template <int N, int TRA, int TRB>
INLINE void at_wgmma(float *d, const at_desc da, const at_desc db, const int acc_in)
{
    static_assert(N == 16 || N == 32 || N == 64 || N == 128 || N == 256,
                  "wgmma N: 16, 32, 64, 128 or 256");
    if constexpr (N == 16)
        AT_WGMMA_SS(16, 8, 9, 10, 11, 12);
    else if constexpr (N == 32)
        AT_WGMMA_SS(32, 16, 17, 18, 19, 20);
    else if constexpr (N == 64)
        AT_WGMMA_SS(64, 32, 33, 34, 35, 36);
    else if constexpr (N == 128)
        AT_WGMMA_SS(128, 64, 65, 66, 67, 68);
    else
        AT_WGMMA_SS(256, 128, 129, 130, 131, 132);
}

/* The same with A (64x16, K-major) from registers: a[0..3], this thread's four registers of
 * two 16-bit elements in the A fragment layout (top of this file); TRB as above. The registers
 * are read asynchronously: they must not change before the wgmma_wait that retires this MMA.
 * Asm operands: the N/2 accumulators, a[0..3] (A0 .. A0+3), db, acc_in, TRB. */
#define AT_WGMMA_RS(N, A0, A1, A2, A3, B, P, TI_B)                                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #P ", 0;\n"                                  \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." AT_MMA_TYPE "." AT_MMA_TYPE     \
                 "\n{" AT_REGS_##N "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B             \
                                   ", p, 1, 1, %" #TI_B ";\n}\n"                                   \
                 : AT_ACC_##N                                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc_in), "n"(TRB))
template <int N, int TRB>
INLINE void at_wgmma_rs(float *d, const unsigned *a, const at_desc db, const int acc_in)
{
    static_assert(N == 64 || N == 128 || N == 256, "wgmma N: 64, 128 or 256");
    if constexpr (N == 64)
        AT_WGMMA_RS(64, 32, 33, 34, 35, 36, 37, 38);
    else if constexpr (N == 128)
        AT_WGMMA_RS(128, 64, 65, 66, 67, 68, 69, 70);
    else
        AT_WGMMA_RS(256, 128, 129, 130, 131, 132, 133, 134);
}
#undef AT_WGMMA_RS
#undef AT_WGMMA_SS
#undef AT_REGS_256
#undef AT_REGS_128
#undef AT_REGS_64
#undef AT_REGS_32
#undef AT_REGS_16
#undef AT_ACC_256
#undef AT_ACC_128
#undef AT_ACC_64
#undef AT_ACC_32
#undef AT_ACC_16
#undef AT_ACC32
#undef AT_ACC8
#endif /* AT_PTX_EMULATE */

/* at_fence_reg on the N registers r[0 .. N-1] (around the asynchronous MMAs that use them). */
template <int N, typename T> INLINE void at_fence_regs(T *r)
{
    AT_UNROLL(N)
    for (int i = 0; i < N; ++i) at_fence_reg(r[i]);
}

/* ---- shared-memory layouts and descriptors --------------------------------------------------- */

/* The hardware swizzle of an SW-byte atom (SW = 128, 64 or 32) on a byte offset from a
 * 1024-byte aligned base. */
template <int SW> INLINE int at_swz(const int addr)
{
    return addr ^ (((addr >> 7) & (SW / 16 - 1)) << 4);
}

/* Byte offset of the 8-element chunk starting at (mn, k) of a K-major tile of Rows rows (mn)
 * with Ksw k per swizzled row, k % 8 == 0. */
template <int Rows, int Ksw> INLINE int at_off_k(const int mn, const int k)
{
    return at_swz<Ksw * 2>((k / Ksw) * (Rows * Ksw * 2) + mn * (Ksw * 2) + (k % Ksw) * 2);
}
/* ... of an MN-major tile of Krows rows (k): chunk (mn .. mn+7, k), mn % 8 == 0. */
template <int Krows> INLINE int at_off_mn(const int mn, const int k)
{
    return at_swz<128>((mn / 64) * (Krows * 128) + k * 128 + (mn % 64) * 2);
}

/* Descriptor fields: start address, LBO and SBO in 16-byte units (14 bits each) and the layout
 * type in bits 62-63 (1: 128B swizzle, 2: 64B, 3: 32B); base offset 0 (atoms 1024-aligned). */
INLINE at_desc at_make_desc(const at_saddr start, const unsigned lbo, const unsigned sbo,
                            const unsigned sw)
{
    const unsigned long long type = sw == 128 ? 1ull : sw == 64 ? 2ull : 3ull;
    return (unsigned long long)((start & 0x3ffffu) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3fffu) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3fffu) << 32) | (type << 62);
}
/* Byte offset of column k0 (k0 % 16 == 0) in a K-major tile, and in an MN-major one. */
template <int Rows, int Ksw> INLINE int at_koff_k(const int k0)
{
    return (k0 / Ksw) * (Rows * Ksw * 2) + (k0 % Ksw) * 2;
}
INLINE int at_koff_mn(const int k0) { return k0 * 128; }
/* The 64 (or N) x 16 operand at rows mn0.., k0.. (k0 % 16 == 0) of a K-major tile at `tile`. */
template <int Rows, int Ksw>
INLINE at_desc at_desc_k(const at_saddr tile, const int mn0, const int k0)
{
    return at_make_desc(tile + at_koff_k<Rows, Ksw>(k0) + mn0 * (Ksw * 2), 16, 8 * Ksw * 2,
                        Ksw * 2);
}
/* ... of an MN-major tile of Krows rows (k). */
template <int Krows> INLINE at_desc at_desc_mn(const at_saddr tile, const int mn0, const int k0)
{
    return at_make_desc(tile + (mn0 / 64) * (Krows * 128) + at_koff_mn(k0), Krows * 128, 1024, 128);
}
/* The descriptor d with its start address `units` x 16 bytes on: the start field holds address
 * bits 4-17 and shared memory ends below 2^18, so the sum stays in the field (and in the low
 * word). Moves a descriptor to another stage or k step with one 32-bit add. */
INLINE at_desc at_desc_add(const at_desc d, const unsigned units)
{
    return (d & 0xffffffff00000000ull) | (unsigned)((unsigned)d + units);
}

#endif
