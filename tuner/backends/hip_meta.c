/* hip_meta.c — reads the AMDGPU metadata note of a code object: an ELF walk (bounds-checked, the
 * object may come from a database file) to the "AMDGPU" note of type NT_AMDGPU_METADATA, whose
 * payload msgpack-c decodes; see hip_meta.h. */
#include "hip_meta.h"

#include <elf.h>
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#define AT_NT_AMDGPU_METADATA 32 /* LLVM's ELF::NT_AMDGPU_METADATA (code object v3+) */

/* The note's payload inside elf, or NULL with why. Notes are found through the section headers
 * (SHT_NOTE) and, when a stripped object has none, the program headers (PT_NOTE). */
static const unsigned char *find_note(const unsigned char *elf, size_t len, size_t *desc_len,
                                      char *why, size_t whylen)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(elf, ELFMAG, SELFMAG) != 0) {
        snprintf(why, whylen, "not an ELF file (%zu bytes)", len);
        return NULL;
    }
    Elf64_Ehdr eh;
    memcpy(&eh, elf, sizeof eh);
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_AMDGPU) {
        snprintf(why, whylen, "not an AMDGPU ELF64 code object (machine %u)", eh.e_machine);
        return NULL;
    }
    /* Each candidate region [off, off + size) that may hold notes. */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t table = pass == 0 ? eh.e_shoff : eh.e_phoff;
        uint64_t entsz = pass == 0 ? eh.e_shentsize : eh.e_phentsize;
        uint64_t count = pass == 0 ? eh.e_shnum : eh.e_phnum;
        if (!table || entsz < (pass == 0 ? sizeof(Elf64_Shdr) : sizeof(Elf64_Phdr))) continue;
        for (uint64_t i = 0; i < count; i++) {
            uint64_t at = table + i * entsz;
            if (at > len || entsz > len - at) break;
            uint64_t off, size;
            if (pass == 0) {
                Elf64_Shdr sh;
                memcpy(&sh, elf + at, sizeof sh);
                if (sh.sh_type != SHT_NOTE) continue;
                off = sh.sh_offset;
                size = sh.sh_size;
            } else {
                Elf64_Phdr ph;
                memcpy(&ph, elf + at, sizeof ph);
                if (ph.p_type != PT_NOTE) continue;
                off = ph.p_offset;
                size = ph.p_filesz;
            }
            if (off > len || size > len - off) continue;
            /* Walk the notes: 12-byte header, name and payload each padded to 4 bytes. */
            for (uint64_t p = off; p + 12 <= off + size;) {
                uint32_t hdr[3];
                memcpy(hdr, elf + p, sizeof hdr);
                uint64_t name_at = p + 12, nsz = (hdr[0] + 3u) & ~3u, dsz = (hdr[1] + 3u) & ~3u;
                uint64_t desc_at = name_at + nsz;
                if (desc_at > off + size || hdr[1] > off + size - desc_at) break;
                if (hdr[2] == AT_NT_AMDGPU_METADATA && hdr[0] == 7 &&
                    memcmp(elf + name_at, "AMDGPU", 7) == 0) {
                    *desc_len = hdr[1];
                    return elf + desc_at;
                }
                p = desc_at + dsz;
            }
        }
    }
    snprintf(why, whylen, "the code object has no AMDGPU metadata note");
    return NULL;
}

static int key_is(const msgpack_object *k, const char *s)
{
    size_t n = strlen(s);
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
           memcmp(k->via.str.ptr, s, n) == 0;
}

/* The value of key in map m, or NULL. */
static const msgpack_object *map_get(const msgpack_object *m, const char *key)
{
    if (m->type != MSGPACK_OBJECT_MAP) return NULL;
    for (uint32_t i = 0; i < m->via.map.size; i++)
        if (key_is(&m->via.map.ptr[i].key, key)) return &m->via.map.ptr[i].val;
    return NULL;
}

static int64_t map_int(const msgpack_object *m, const char *key)
{
    const msgpack_object *v = map_get(m, key);
    if (!v) return -1;
    if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        return v->via.u64 > INT64_MAX ? -1 : (int64_t)v->via.u64;
    if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) return v->via.i64;
    if (v->type == MSGPACK_OBJECT_BOOLEAN) return v->via.boolean;
    return -1;
}

static void copy_str(const msgpack_object *v, char *dst, size_t cap)
{
    dst[0] = '\0';
    if (!v || v->type != MSGPACK_OBJECT_STR) return;
    size_t n = v->via.str.size < cap - 1 ? v->via.str.size : cap - 1;
    memcpy(dst, v->via.str.ptr, n);
    dst[n] = '\0';
}

int at_amdgpu_read_meta(const void *elf, size_t len, const char *name, at_amdgpu_kernel_meta *out,
                        char *why, size_t whylen)
{
    memset(out, 0xff, sizeof *out); /* every int64 field -1 */
    out->dynamic_stack = 0;
    out->target[0] = '\0';
    if (!elf) {
        snprintf(why, whylen, "no code object");
        return -1;
    }
    size_t dlen = 0;
    const unsigned char *desc = find_note(elf, len, &dlen, why, whylen);
    if (!desc) return -1;

    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int rc = -1;
    size_t off = 0;
    if (msgpack_unpack_next(&u, (const char *)desc, dlen, &off) != MSGPACK_UNPACK_SUCCESS ||
        u.data.type != MSGPACK_OBJECT_MAP) {
        snprintf(why, whylen, "the AMDGPU metadata note is not a msgpack map");
        goto done;
    }
    const msgpack_object *kernels = map_get(&u.data, "amdhsa.kernels");
    if (!kernels || kernels->type != MSGPACK_OBJECT_ARRAY) {
        snprintf(why, whylen, "the AMDGPU metadata has no amdhsa.kernels list");
        goto done;
    }
    for (uint32_t i = 0; i < kernels->via.array.size; i++) {
        const msgpack_object *k = &kernels->via.array.ptr[i];
        const msgpack_object *kname = map_get(k, ".name");
        if (name && !(kname && key_is(kname, name))) continue;
        out->vgprs = map_int(k, ".vgpr_count");
        out->agprs = map_int(k, ".agpr_count");
        out->sgprs = map_int(k, ".sgpr_count");
        out->vgpr_spills = map_int(k, ".vgpr_spill_count");
        out->sgpr_spills = map_int(k, ".sgpr_spill_count");
        out->lds_bytes = map_int(k, ".group_segment_fixed_size");
        out->scratch_bytes = map_int(k, ".private_segment_fixed_size");
        out->max_flat_wg = map_int(k, ".max_flat_workgroup_size");
        out->wavefront_size = map_int(k, ".wavefront_size");
        out->dynamic_stack = map_int(k, ".uses_dynamic_stack") == 1;
        copy_str(map_get(&u.data, "amdhsa.target"), out->target, sizeof out->target);
        rc = 0;
        goto done;
    }
    snprintf(why, whylen, "no kernel %s in the code object's metadata (%u kernels)",
             name ? name : "at all", kernels->via.array.size);
done:
    msgpack_unpacked_destroy(&u);
    return rc;
}

void at_amdgpu_meta_resources(const at_amdgpu_kernel_meta *m, at_resources *out)
{
    *out = (at_resources){-1, -1, -1, -1, -1, 0};
    out->registers = m->vgprs;
    if (m->vgpr_spills >= 0) out->spill_bytes = 4 * m->vgpr_spills;
    out->shared_bytes = m->lds_bytes;
    out->local_bytes = m->scratch_bytes;
    out->max_threads = m->max_flat_wg;
}
