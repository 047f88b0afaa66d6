/* hip_meta.h — the reader of an AMDGPU code object's metadata note (the msgpack map in the ELF
 * note "AMDGPU" / NT_AMDGPU_METADATA that the compiler writes for code object v3 and later),
 * declared here so tests can feed it code objects compiled in the test. */
#ifndef AT_HIP_META_H
#define AT_HIP_META_H

#include "tuner/backend.h"

/* One kernel's entry of amdhsa.kernels. Fields the note lacks are -1. */
typedef struct at_amdgpu_kernel_meta {
    int64_t vgprs;          /* .vgpr_count: VGPRs per work-item, AGPRs included on gfx90a+ */
    int64_t agprs;          /* .agpr_count: accumulation VGPRs (gfx90a and later; -1 before) */
    int64_t sgprs;          /* .sgpr_count: per wave */
    int64_t vgpr_spills;    /* .vgpr_spill_count: VGPRs spilled to scratch */
    int64_t sgpr_spills;    /* .sgpr_spill_count */
    int64_t lds_bytes;      /* .group_segment_fixed_size: static LDS per work-group */
    int64_t scratch_bytes;  /* .private_segment_fixed_size: scratch per work-item */
    int64_t max_flat_wg;    /* .max_flat_workgroup_size */
    int64_t wavefront_size; /* .wavefront_size: 32 or 64 */
    int dynamic_stack;      /* .uses_dynamic_stack: 1 when scratch size is a lower bound */
    char target[64];        /* amdhsa.target, e.g. "amdgcn-amd-amdhsa--gfx90a:sramecc+" */
} at_amdgpu_kernel_meta;

/* Finds kernel `name` (its .name; NULL: the first kernel) in the code object (an ELF64 shared
 * object) of len bytes. 0 on success; -1 with why filled when the object is not an AMDGPU ELF,
 * has no metadata note, the note is not valid msgpack, or the kernel is not in it. */
int at_amdgpu_read_meta(const void *elf, size_t len, const char *name, at_amdgpu_kernel_meta *out,
                        char *why, size_t whylen);

/* The resources the pipeline checks, from the metadata: registers = .vgpr_count, which is
 * already the whole per-lane register use (LLVM: on gfx90a and later the unified file, arch
 * VGPRs rounded to 4 plus AGPRs; on gfx908 the larger of the two separate files), spill_bytes =
 * 4 x spilled VGPRs (scratch traffic; SGPRs spill into VGPR lanes, which is cheap, so they do
 * not count), shared_bytes = LDS, local_bytes = scratch, max_threads = max flat work-group
 * size. */
void at_amdgpu_meta_resources(const at_amdgpu_kernel_meta *m, at_resources *out);

/* The HIP backend's last-level cache in bytes for a device of target arch ("gfx942:sramecc+")
 * whose runtime reports an L2 of l2 bytes: ROCm's hipDeviceAttributeL2CacheSize (up to ROCm 6 at
 * least; no attribute names the Infinity Cache) is the L2, so families with a larger
 * memory-side cache get its size from a table. The device info's l2_bytes holds this, and the
 * pipeline flushes twice it between timed runs (tuner/run.c). Defined in hip.c. */
int64_t at_hip_last_level_cache(const char *arch, int64_t l2);

#endif
