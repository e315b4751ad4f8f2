// consumer_cxx.cpp -- the header from C++ (tests/install/run.sh builds it with -Wall -Wextra
// -Werror): the CG_..._INIT values, C linkage, and a call into the installed library.
#include <chunkgen.h>

#include <cstdio>

int main() {
    cg_exec ex = CG_EXEC_INIT;
    cg_ssd_fwd_args a = CG_SSD_FWD_ARGS_INIT;
    cg_sscan_bwd_args b = CG_SSCAN_BWD_ARGS_INIT;
    if (ex.size != sizeof ex || a.size != sizeof a || b.size != sizeof b || ex.config || a.q.data) {
        std::fprintf(stderr, "CG_..._INIT: wrong values\n");
        return 1;
    }
    cg_context *ctx = nullptr;
    if (cg_context_create(&ctx) != CG_OK) return 1;
    // empty args: a status and a message naming the argument, not a crash
    cg_status st = cg_ssd_fwd(ctx, &a, &ex);
    bool ok = st == CG_EINVAL && cg_errmsg(ctx)[0] != '\0' && cg_version_number() == CG_VERSION_NUMBER;
    if (!ok) std::fprintf(stderr, "cg_ssd_fwd on empty args: %s: %s\n", cg_status_str(st), cg_errmsg(ctx));
    cg_context_free(ctx);
    if (ok) std::printf("ok c++\n");
    return ok ? 0 : 1;
}
