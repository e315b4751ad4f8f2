/* test_kernels_api.c -- the public "kernels" calls of include/chunkgen.h that need no
 * shape: cg_device_query, cg_kernel_list, cg_kernel_describe, the kernel cache's
 * cg_kcache_dir/list/read/import, cg_free. Each with good input and each bad input's
 * message naming the argument. The cache entries are written with the library's own
 * writer (kcache.h), as the CUDA executor and the emulator write them. */
#include "cg_test.h"
#include "cli_testlib.h"
#include "cpu/cpu_isa.h"
#include "cuda/cg_cuda.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CG_TEST(kernels_api_device_query) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_device_info d = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CPU, &d));
    CG_CHECK(d.size == sizeof d, "size kept: %zu", d.size);
    CG_CHECK(d.cpu_model[0] && d.cpu_cores >= 1, "cpu: '%s', %d cores", d.cpu_model, d.cpu_cores);
    /* the variant is the one the CPU path runs, and one of those this CPU can run */
    CG_CHECK(!strcmp(d.cpu_isa, cg__cpu_isa_ops()->name), "isa %s, the path runs %s", d.cpu_isa, cg__cpu_isa_ops()->name);
    CG_CHECK(strstr(d.cpu_isas, d.cpu_isa) && strstr(d.cpu_isas, "baseline"), "isas '%s' with '%s'", d.cpu_isas,
             d.cpu_isa);
    for (int isa = 0; isa < CG_ISA_COUNT; isa++)
        CG_CHECK(!cg__cpu_isa_supported((cg_cpu_isa)isa) == !strstr(d.cpu_isas, cg__cpu_isa_name((cg_cpu_isa)isa)),
                 "isas '%s' and %s", d.cpu_isas, cg__cpu_isa_name((cg_cpu_isa)isa));
    CG_CHECK(!d.gpu && !d.driver_version && !d.nvrtc_version, "the cpu backend looks at no GPU or toolchain");

    /* cuda: the driver's device or why there is none; NVRTC as the loader finds it */
    cg_device_info c = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CUDA, &c));
    const char *why;
    if (!cg__cu_api(&why)) {
        CG_CHECK(!c.gpu && !c.driver_version && strstr(c.driver_why, "libcuda") && strstr(c.gpu_why, "libcuda"),
                 "no driver: gpu %d, driver %d '%s', gpu_why '%s'", c.gpu, c.driver_version, c.driver_why, c.gpu_why);
    } else {
        CG_CHECK(c.driver_version > 0, "a driver says its version");
    }
    if (cg__nvrtc_api(&why)) {
        char id[1024];
        CG_CHECK_OK(ctx, cg__nvrtc_id(ctx, id, sizeof id));
        CG_CHECK(c.nvrtc_version >= 11000 && !strcmp(c.nvrtc_id, id), "nvrtc %d '%s' (the key's '%s')",
                 c.nvrtc_version, c.nvrtc_id, id);
    } else {
        CG_CHECK(!c.nvrtc_version && !c.nvrtc_id[0] && c.nvrtc_why[0], "no NVRTC: '%s'", c.nvrtc_why);
    }
    /* emulate: the stand-in device (when a C++ compiler is there) */
    cg_device_info e = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_EMULATE, &e));
    CG_CHECK(e.gpu ? e.gpu_emulated && e.gpu_arch == 80 && e.gpu_sm_count > 0 : e.gpu_why[0] != 0,
             "emulate: gpu %d, sm_%d, why '%s'", e.gpu, e.gpu_arch, e.gpu_why);
    CG_CHECK(!strcmp(cg_errmsg(ctx), ""), "no device is not an error: '%s'", cg_errmsg(ctx));

    /* an older caller's smaller struct: nothing written past its size */
    unsigned char old[sizeof(cg_device_info) + 8];
    const size_t small = offsetof(cg_device_info, gpu);
    memset(old, 0xAB, sizeof old);
    memcpy(old, &small, sizeof small);
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_CPU, (cg_device_info *)old));
    CG_CHECK(old[small] == 0xAB && old[sizeof old - 1] == 0xAB, "wrote past the caller's %zu bytes", small);
    CG_CHECK(!strcmp(((cg_device_info *)old)->cpu_isa, d.cpu_isa), "the older struct's members are filled");

    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_device_query(ctx, CG_BACKEND_REF, &d), CG_EINVAL, "backend", "ref backend");
    CG_CHECK_REFUSED(ctx, cg_device_query(ctx, CG_BACKEND_AUTO, &d), CG_EINVAL, "backend", "auto backend");
    CG_CHECK_REFUSED(ctx, cg_device_query(ctx, CG_BACKEND_CPU, NULL), CG_EINVAL, "out", "NULL out");
    cg_device_info tiny = {.size = 3};
    CG_CHECK_REFUSED(ctx, cg_device_query(ctx, CG_BACKEND_CPU, &tiny), CG_EINVAL, "size", "size 3");
    CG_CHECK(cg_device_query(NULL, CG_BACKEND_CPU, &d) == CG_EINVAL, "NULL ctx");
    cg_context_free(ctx);
}

CG_TEST(kernels_api_list_describe) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    const char *const *names = NULL;
    int n = -1, fwd = 0, cpu = 0;
    CG_CHECK_OK(ctx, cg_kernel_list(ctx, &names, &n));
    for (int i = 0; names && i < n; i++) {
        CG_CHECK(names[i] != NULL, "name %d of %d is NULL", i, n);
        if (!names[i]) break;
        fwd += !strcmp(names[i], "ssd_fwd");
        cpu += !strcmp(names[i], "sscan_cpu");
    }
    CG_CHECK(names && n >= 6 && !names[n] && fwd == 1 && cpu == 1, "%d kernels, ssd_fwd %d, sscan_cpu %d", n, fwd, cpu);
    CG_CHECK_OK(ctx, cg_kernel_list(ctx, &names, NULL)); /* n optional */
    char *text = NULL;
    CG_CHECK_OK(ctx, cg_kernel_describe(ctx, "ssd_fwd", &text));
    CG_CHECK(text && !strncmp(text, "ssd_fwd (op ssd_fwd", 19) && strstr(text, "\n  chunk "), "describe: %.200s",
             text ? text : "(null)");
    cg_free(text);
    CG_CHECK_OK(ctx, cg_kernel_describe(ctx, "ssd_cpu", &text));
    CG_CHECK(text && strstr(text, "backend cpu"), "a CPU space says so: %.200s", text ? text : "(null)");
    cg_free(text);
    cg_free(NULL);
    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_kernel_list(ctx, NULL, &n), CG_EINVAL, "names", "NULL names");
    text = (char *)"untouched";
    CG_CHECK_REFUSED(ctx, cg_kernel_describe(ctx, "no_such_kernel", &text), CG_ENOTFOUND, "no_such_kernel",
                     "unknown kernel");
    CG_CHECK(text == NULL, "*text NULL after a refusal");
    CG_CHECK_REFUSED(ctx, cg_kernel_describe(ctx, NULL, &text), CG_EINVAL, "kernel", "NULL kernel");
    CG_CHECK_REFUSED(ctx, cg_kernel_describe(ctx, "ssd_fwd", NULL), CG_EINVAL, "text", "NULL text");
    cg_context_free(ctx);
}

/* ------------------------------------------------------------ the kernel cache */

/* A CUBIN-kind key as the executor writes it (cg__cubin_key's layout), for sm_<arch>. */
static void cubin_key(char *buf, size_t cap, const char *head, int arch, const char *name) {
    snprintf(buf, cap, "%s\nkind cubin\ntarget sm_%d\ncompiler test\noptions -arch\nname %s\nsource 4 bytes\nabcd",
             head, arch, name);
}

static int find(const cg_kcache_entry *es, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(es[i].name, name)) return i;
    return -1;
}

/* dir with: two CUBINs of this version (sm_90; sm_80 from a bundle), an emulator
 * module, a CUBIN of another chunkgen version and a damaged entry. */
static void fill_cache(const char *dir) {
    char key[512], path[4400];
    cubin_key(key, sizeof key, CG_CUBIN_KEY_HEAD, 90, "k90");
    CG_CHECK(cg__kcache_put(dir, "k90", key, "CUBIN90", 7, "ptxas info") == CG_OK, "put k90");
    cubin_key(key, sizeof key, CG_CUBIN_KEY_HEAD, 80, "k80");
    CG_CHECK(cg__kcache_put(dir, "k80", key, "CUBIN80", 7, CG_BUNDLE_LOG_TAG "b.json\n") == CG_OK, "put k80");
    CG_CHECK(cg__kcache_put(dir, "emu_kemu", "chunkgen emulate module, ABI 1\nsource:\nx", "ELF", 3, NULL) == CG_OK,
             "put emu");
    cubin_key(key, sizeof key, "chunkgen 0.0.1 kcache-format 1", 90, "kold");
    CG_CHECK(cg__kcache_put(dir, "kold", key, "OLD", 3, NULL) == CG_OK, "put old");
    snprintf(path, sizeof path, "%s/kbad-0123456789abcdef0123456789abcdef.cgk", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("CGKCACHE but not an entry", f);
        fclose(f);
    }
}

CG_TEST(kernels_api_kcache_list) {
    char root[4096], dir[4200], got[4300];
    if (mk_tmpdir(root, sizeof root)) return;
    join(dir, sizeof dir, root, "kernels");
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    CG_CHECK_OK(ctx, cg_context_set_cache_dir(ctx, root));
    CG_CHECK_OK(ctx, cg_kcache_dir(ctx, got, sizeof got));
    CG_CHECK(!strcmp(got, dir), "kcache dir %s, expected %s", got, dir);
    int n = -1;
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, NULL, NULL, 0, &n));
    CG_CHECK(n == 0, "a missing directory has no entries: %d", n);
    fill_cache(dir);
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, NULL, NULL, 0, &n)); /* ctx's directory */
    CG_CHECK(n == 5, "5 entries, listed %d", n);
    cg_kcache_entry es[8];
    for (int i = 0; i < 8; i++) es[i] = (cg_kcache_entry)CG_KCACHE_ENTRY_INIT;
    int m = 0;
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, dir, es, 8, &m));
    CG_CHECK(m == 5, "listed %d", m);
    for (int i = 1; i < m; i++) CG_CHECK(strcmp(es[i - 1].file, es[i].file) < 0, "sorted: %s, %s", es[i - 1].file, es[i].file);
    int i90 = find(es, m, "k90"), i80 = find(es, m, "k80"), iemu = find(es, m, "kemu");
    CG_CHECK(i90 >= 0 && es[i90].usable && !strcmp(es[i90].kind, "cubin") && es[i90].arch == 90 && !es[i90].bundled &&
                 es[i90].bytes > 7,
             "k90: usable %d kind %s arch %d bundled %d", i90 >= 0 ? es[i90].usable : -1, i90 >= 0 ? es[i90].kind : "",
             i90 >= 0 ? es[i90].arch : 0, i90 >= 0 ? es[i90].bundled : -1);
    CG_CHECK(i80 >= 0 && es[i80].arch == 80 && es[i80].bundled, "k80 from a bundle");
    CG_CHECK(iemu >= 0 && es[iemu].usable && !strcmp(es[iemu].kind, "emulate") && !es[iemu].arch, "the emulator's module");
    int unusable = 0;
    for (int i = 0; i < m; i++) {
        if (es[i].usable) continue;
        unusable++;
        CG_CHECK(!strncmp(es[i].file, "kold-", 5) ? strstr(es[i].why, "another chunkgen version") != NULL
                                                 : !strncmp(es[i].file, "kbad-", 5) && es[i].why[0],
                 "%s unusable: %s", es[i].file, es[i].why);
    }
    CG_CHECK(unusable == 2, "2 unusable entries, got %d", unusable);
    /* fewer slots than entries: the first cap, and the whole count */
    cg_kcache_entry two[2] = {CG_KCACHE_ENTRY_INIT, CG_KCACHE_ENTRY_INIT};
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, dir, two, 2, &m));
    CG_CHECK(m == 5 && !strcmp(two[1].file, es[1].file), "cap 2: n %d, second %s", m, two[1].file);
    /* an older caller's smaller struct: its stride, nothing past its members */
    /* (an older header's struct ending at `why`: its sizeof, padded to the struct's alignment) */
    const size_t al = _Alignof(cg_kcache_entry);
    const size_t small = (offsetof(cg_kcache_entry, kind) + al - 1) / al * al;
    unsigned char *old = malloc(small * 5 + 1);
    if (old) {
        memset(old, 0xAB, small * 5 + 1);
        memcpy(old, &small, sizeof small);
        CG_CHECK_OK(ctx, cg_kcache_list(ctx, dir, (cg_kcache_entry *)old, 5, &m));
        for (int i = 0; i < 5; i++) {
            const cg_kcache_entry *e = (const cg_kcache_entry *)(old + (size_t)i * small);
            CG_CHECK(!strcmp(e->file, es[i].file) && e->size == small, "old stride: %d is %s", i, e->file);
        }
        CG_CHECK(old[small * 5] == 0xAB, "wrote past the caller's array");
        free(old);
    }
    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_kcache_list(ctx, dir, es, 8, NULL), CG_EINVAL, "n is NULL", "NULL n");
    CG_CHECK_REFUSED(ctx, cg_kcache_list(ctx, dir, es, -1, &m), CG_EINVAL, "cap", "cap -1");
    CG_CHECK_REFUSED(ctx, cg_kcache_list(ctx, dir, NULL, 3, &m), CG_EINVAL, "entries", "NULL entries");
    cg_kcache_entry bad = {.size = 2};
    CG_CHECK_REFUSED(ctx, cg_kcache_list(ctx, dir, &bad, 1, &m), CG_EINVAL, "size", "size 2");
    char tiny[8];
    CG_CHECK_REFUSED(ctx, cg_kcache_dir(ctx, tiny, sizeof tiny), CG_EINVAL, "cap", "small buffer");
    CG_CHECK_REFUSED(ctx, cg_kcache_dir(ctx, NULL, 64), CG_EINVAL, "buf", "NULL buffer");
    cg_context_free(ctx);
    rm_tree(root);
}

CG_TEST(kernels_api_kcache_read_import) {
    char root[4096], src[4200], dst[4200], dry[4200];
    if (mk_tmpdir(root, sizeof root)) return;
    join(src, sizeof src, root, "src");
    join(dst, sizeof dst, root, "dst");
    join(dry, sizeof dry, root, "dry");
    fill_cache(src);
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_kcache_entry es[8];
    for (int i = 0; i < 8; i++) es[i] = (cg_kcache_entry)CG_KCACHE_ENTRY_INIT;
    int n = 0;
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, src, es, 8, &n));
    int i90 = find(es, n, "k90"), iold = -1, ibad = -1;
    for (int i = 0; i < n; i++) {
        if (!strncmp(es[i].file, "kold-", 5)) iold = i;
        if (!strncmp(es[i].file, "kbad-", 5)) ibad = i;
    }
    CG_CHECK(i90 >= 0 && iold >= 0 && ibad >= 0, "the entries are there");
    if (i90 < 0 || iold < 0 || ibad < 0) {
        cg_context_free(ctx);
        rm_tree(root);
        return;
    }
    void *img = NULL;
    size_t len = 0;
    CG_CHECK_OK(ctx, cg_kcache_read(ctx, src, es[i90].file, &img, &len));
    CG_CHECK(img && (int64_t)len == es[i90].bytes && !memcmp(img, "CGKCACHE", 8), "the whole entry: %zu bytes", len);
    int added = -1;
    CG_CHECK_OK(ctx, cg_kcache_import(ctx, dst, img, len, "bundle.json", 0, &added));
    CG_CHECK(added == 1, "imported: added %d", added);
    CG_CHECK_OK(ctx, cg_kcache_import(ctx, dst, img, len, "bundle.json", 0, &added));
    CG_CHECK(added == 0, "the same key again: added %d", added);
    cg_kcache_entry d[2] = {CG_KCACHE_ENTRY_INIT, CG_KCACHE_ENTRY_INIT};
    int m = 0;
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, dst, d, 2, &m));
    CG_CHECK(m == 1 && !strcmp(d[0].file, es[i90].file) && d[0].bundled && d[0].arch == 90,
             "imported under its key's name, from a bundle: %d %s bundled %d", m, d[0].file, d[0].bundled);
    CG_CHECK_OK(ctx, cg_kcache_import(ctx, dry, img, len, NULL, 1, &added));
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, dry, NULL, 0, &m));
    CG_CHECK(added == 1 && m == 0, "dry: would add %d, wrote %d", added, m);
    /* bad input: named, nothing written */
    CG_CHECK_REFUSED(ctx, cg_kcache_import(ctx, dry, NULL, 10, NULL, 0, &added), CG_EINVAL, "image", "NULL image");
    CG_CHECK_REFUSED(ctx, cg_kcache_import(ctx, dry, img, len - 1, NULL, 0, &added), CG_EINVAL, "image",
                     "a truncated image");
    ((unsigned char *)img)[len / 2] ^= 1;
    CG_CHECK_REFUSED(ctx, cg_kcache_import(ctx, dry, img, len, NULL, 0, &added), CG_EINVAL, "image", "a flipped bit");
    cg_free(img);
    CG_CHECK_OK(ctx, cg_kcache_read(ctx, src, es[iold].file, &img, &len));
    CG_CHECK_REFUSED(ctx, cg_kcache_import(ctx, dry, img, len, NULL, 0, &added), CG_EINVAL, "another chunkgen version",
                     "another version's kernel");
    cg_free(img);
    CG_CHECK_OK(ctx, cg_kcache_list(ctx, dry, NULL, 0, &m));
    CG_CHECK(m == 0, "refused images wrote %d entries", m);
    CG_CHECK_REFUSED(ctx, cg_kcache_read(ctx, src, es[ibad].file, &img, &len), CG_EINVAL, "file", "a damaged entry");
    CG_CHECK(img == NULL && len == 0, "nothing returned for a damaged entry");
    CG_CHECK_REFUSED(ctx, cg_kcache_read(ctx, src, "../etc/passwd", &img, &len), CG_EINVAL, "file", "a path");
    CG_CHECK_REFUSED(ctx, cg_kcache_read(ctx, src, "x-0123456789abcdef0123456789abcdee.cgk", &img, &len), CG_ENOTFOUND,
                     "file", "a missing entry");
    CG_CHECK_REFUSED(ctx, cg_kcache_read(ctx, src, es[i90].file, NULL, &len), CG_EINVAL, "image", "NULL image");
    cg_context_free(ctx);
    rm_tree(root);
}

/* ------------------------------------------------- device memory and timers */

CG_TEST(kernels_api_device_memory) {
    cg_context *ctx;
    CG_CHECK_OK(NULL, cg_context_create(&ctx));
    cg_device_info e = CG_DEVICE_INFO_INIT;
    CG_CHECK_OK(ctx, cg_device_query(ctx, CG_BACKEND_EMULATE, &e));
    if (!e.gpu) {
        cg_test_skip("the emulator has no C++ compiler here");
        cg_context_free(ctx);
        return;
    }
    /* emulate: host memory its kernels address; a round trip through it */
    const cg_backend be = CG_BACKEND_EMULATE;
    float in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (float)i * 0.5f, out[i] = -1.0f;
    void *d = NULL;
    CG_CHECK_OK(ctx, cg_device_alloc(ctx, be, sizeof in, &d));
    CG_CHECK_OK(ctx, cg_device_copy(ctx, be, d, in, sizeof in, 0, NULL));
    CG_CHECK_OK(ctx, cg_device_copy(ctx, be, out, d, sizeof out, 1, NULL));
    CG_CHECK_OK(ctx, cg_device_sync(ctx, be, NULL));
    CG_CHECK(d && !memcmp(in, out, sizeof in), "the round trip changed the data");
    void *tok = NULL;
    double ms = -1;
    CG_CHECK_OK(ctx, cg_device_flush_l2(ctx, be, NULL));
    CG_CHECK_OK(ctx, cg_device_timer_start(ctx, be, NULL, &tok));
    CG_CHECK_OK(ctx, cg_device_timer_stop(ctx, be, NULL, tok, &ms));
    CG_CHECK(ms >= 0 && ms < 1e4, "timed %g ms", ms);
    /* the timers are a context's few: the fifth outstanding one is refused, all released */
    void *t[5] = {0};
    int got = 0;
    for (int i = 0; i < 5; i++) got += cg_device_timer_start(ctx, be, NULL, &t[i]) == CG_OK;
    CG_CHECK(got == 4 && strstr(cg_errmsg(ctx), "timers"), "%d timers started: %s", got, cg_errmsg(ctx));
    for (int i = 0; i < 4; i++) CG_CHECK_OK(ctx, cg_device_timer_stop(ctx, be, NULL, t[i], &ms));
    cg_device_free(ctx, be, d);
    cg_device_free(ctx, be, NULL);
    /* bad input: named */
    CG_CHECK_REFUSED(ctx, cg_device_alloc(ctx, CG_BACKEND_CPU, 16, &d), CG_EINVAL, "backend", "the cpu backend");
    CG_CHECK_REFUSED(ctx, cg_device_alloc(ctx, be, 16, NULL), CG_EINVAL, "ptr", "NULL ptr");
    CG_CHECK_REFUSED(ctx, cg_device_copy(ctx, be, NULL, in, sizeof in, 0, NULL), CG_EINVAL, "dst", "NULL dst");
    CG_CHECK_REFUSED(ctx, cg_device_copy(ctx, be, out, NULL, sizeof in, 1, NULL), CG_EINVAL, "src", "NULL src");
    CG_CHECK_REFUSED(ctx, cg_device_timer_start(ctx, be, NULL, NULL), CG_EINVAL, "token", "NULL token");
    CG_CHECK_REFUSED(ctx, cg_device_sync(ctx, CG_BACKEND_REF, NULL), CG_EINVAL, "backend", "the ref backend");
    if (!cg__cu_api(NULL)) /* cuda without a driver: said, not crashed */
        CG_CHECK_REFUSED(ctx, cg_device_alloc(ctx, CG_BACKEND_CUDA, 16, &d), CG_ENODEV, "libcuda", "no driver");
    cg_context_free(ctx);
}
