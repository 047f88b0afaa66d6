/* device.c — a live device's identity as the devices table keeps it (cache/record.h), built by
 * the same rules as the identity a device key alone gives (at_device_rec_fill). */
#include "tuner/tuner.h"

#include <stdio.h>
#include <string.h>

void at_device_rec_from_info(const at_device_info *info, const char *compiler, at_device_rec *out)
{
    memset(out, 0, sizeof *out);
    at_device_rec_fill(out, info->backend, info->platform, info->name, info->arch,
                       info->compute_units);
    snprintf(out->driver, sizeof out->driver, "%s", info->driver);
    snprintf(out->compiler, sizeof out->compiler, "%s", compiler ? compiler : "");
}
