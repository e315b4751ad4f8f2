/* fuzz_npy.c -- libFuzzer target: the .npy reader (tools/npy.c) on arbitrary bytes.
 * The bytes are put in a memfd and read through its /proc/self/fd path, as a file.
 * Any crash, leak or undefined behaviour (ASan/UBSan) is a finding; a read that
 * succeeds must describe the array it returned consistently. scripts/fuzz.sh builds
 * and runs it. */
#include "npy.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_npy", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    cg_npy a;
    char err[512];
    if (cg_npy_read(path, &a, err, sizeof err) == 0) {
        int64_t count = 1;
        for (int i = 0; i < a.t.ndim; i++) count *= a.t.shape[i];
        if (!a.data || a.t.ndim < 0 || a.t.ndim > CG_NPY_MAX_DIMS || count != a.count) abort();
        volatile float sink = 0;
        for (int64_t i = 0; i < a.count; i++) sink += a.data[i]; /* every element readable */
        (void)sink;
        cg_npy_free(&a);
    } else if (!err[0] || !memchr(err, '\0', sizeof err)) {
        abort(); /* a failure always comes with a message */
    }
    return 0;
}
