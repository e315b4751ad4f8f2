/* abi.c -- the growth rule of the public structs, and the version number. */
#include "abi.h"
#include "internal.h"

#include <string.h>

int cg_version_number(void) { return CG_VERSION_NUMBER; }

cg_status cg__abi_in(cg_context *ctx, const char *what, void *out, size_t out_size, const void *in) {
    memset(out, 0, out_size);
    if (in) {
        size_t size;
        memcpy(&size, in, sizeof size);
        if (size == 0) size = out_size;
        if (size < sizeof(size_t))
            return cg__err(ctx, CG_EINVAL, "%s.size: %zu but expected 0 or the struct's sizeof (at least %zu)", what,
                           size, sizeof(size_t));
        for (size_t i = out_size; i < size; i++)
            if (((const unsigned char *)in)[i])
                return cg__err(ctx, CG_EUNSUPPORTED,
                               "%s.size: %zu, larger than this library's %zu, and the newer members are set (built "
                               "against a newer chunkgen.h than the library %s)",
                               what, size, out_size, CG_VERSION_STRING);
        memcpy(out, in, size < out_size ? size : out_size);
    }
    memcpy(out, &out_size, sizeof out_size);
    return CG_OK;
}

cg_status cg__abi_out(cg_context *ctx, const char *what, void *out, const void *full, size_t full_size) {
    if (!out) return cg__err(ctx, CG_EINVAL, "%s: null pointer (expected a struct to write to)", what);
    size_t size;
    memcpy(&size, out, sizeof size);
    if (size == 0) size = full_size;
    if (size < sizeof(size_t))
        return cg__err(ctx, CG_EINVAL, "%s.size: %zu but expected 0 or the struct's sizeof (at least %zu)", what, size,
                       sizeof(size_t));
    /* a newer caller's members this library does not know: zero (their "old behaviour") */
    if (size > full_size) memset((char *)out + full_size, 0, size - full_size);
    memcpy((char *)out + sizeof size, (const char *)full + sizeof size,
           (size < full_size ? size : full_size) - sizeof size);
    memcpy(out, &size, sizeof size);
    return CG_OK;
}
