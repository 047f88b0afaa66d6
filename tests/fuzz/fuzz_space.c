/* fuzz_space.c — libFuzzer target: the YAML space loader (tuner/space/space.c) on any text; a
 * space that loads is then used as the pipeline uses it: variables set, counted, fingerprinted,
 * enumerated when small, and each of its first configurations formatted, parsed back, checked,
 * given launch geometry, memory, defines and its tensor maps' values. */
#include "tuner/space/space.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    at_space *s = NULL;
    if (at_space_load((const char *)data, size, &s) != AT_OK) {
        if (s) abort(); /* a failed load leaves no space */
        return 0;
    }
    for (size_t i = 0; i < s->nproblem; i++) at_space_set(s, s->problem_vars[i], 100 + (int64_t)i);
    for (size_t i = 0; i < s->ndevice; i++) at_space_set(s, s->device_vars[i], 1024);
    at_space_fingerprint(s, 1);
    int64_t *configs = NULL;
    uint16_t *idx = NULL;
    size_t n = 0;
    if (at_space_total(s) <= 4096 && at_space_enumerate(s, &configs, &idx, &n) == AT_OK) {
        char buf[4096], why[256];
        int64_t back[AT_MAX_PARAMS];
        for (size_t i = 0; i < n && i < 16; i++) {
            const int64_t *cfg = configs + i * s->nparams;
            at_config_format(s, cfg, buf, sizeof buf);
            if (at_config_parse(s, buf, back) == AT_OK &&
                memcmp(back, cfg, s->nparams * sizeof *cfg) != 0)
                abort(); /* a formatted configuration reads back as itself */
            at_space_valid(s, cfg, why, sizeof why);
            size_t global[3], local[3], shared, workspace;
            at_space_launch(s, cfg, global, local);
            at_space_memory(s, cfg, &shared, &workspace, NULL);
            at_config_defines(s, cfg, buf, sizeof buf);
            int64_t v;
            for (size_t j = 0; j < s->nderived; j++) at_space_value(s, cfg, s->derived[j].name, &v);
            int64_t tm[AT_TMAP_NEXPR];
            for (size_t a = 0; a < s->nargs; a++)
                if (s->args[a].kind == AT_ARG_TENSORMAP) at_space_tmap(s, cfg, a, tm);
        }
    }
    free(configs);
    free(idx);
    at_space_free(s);
    return 0;
}
