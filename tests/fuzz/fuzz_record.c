/* fuzz_record.c — libFuzzer target: the database's record decoder (cache/record.c, v1 and v2
 * results, best and device records) on any bytes, not NUL-terminated; what parses is formatted
 * again and must parse again. */
#include "cache/record.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char buf[8192];
    at_result_rec r;
    if (at_result_rec_parse(text, size, &r) == AT_OK) {
        at_result_rec_format(&r, buf, sizeof buf);
        at_result_rec again;
        if (at_result_rec_parse(buf, strlen(buf), &again) != AT_OK) abort();
    }
    at_best_rec b;
    if (at_best_rec_parse(text, size, &b) == AT_OK) {
        at_best_rec_format(&b, buf, sizeof buf);
        at_best_rec again;
        if (at_best_rec_parse(buf, strlen(buf), &again) != AT_OK) abort();
    }
    at_device_rec d;
    if (at_device_rec_parse(text, size, &d) == AT_OK) {
        at_sbuf sb = {0};
        at_device_rec_append(&sb, &d);
        at_device_rec again;
        if (!sb.oom && at_device_rec_parse(sb.p, sb.n, &again) != AT_OK) abort();
        at_sb_free(&sb);
    }
    return 0;
}
