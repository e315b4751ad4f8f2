/* cli_testlib.c -- temp directories, files and running the real `chunkgen` binary, for
 * the CLI tests (test_cli.c, test_rel.c). */
#include "cli_testlib.h"
#include "cg_test.h"
#include "npy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int mk_tmpdir(char *buf, size_t len) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    snprintf(buf, len, "%s/cg_cli_XXXXXX", base);
    if (!mkdtemp(buf)) {
        cg_test_fail(__FILE__, __LINE__, "mkdtemp(%s): %s", buf, strerror(errno));
        return -1;
    }
    return 0;
}

int mk_tmpdir_with(char *dir, size_t len, char *path, size_t plen, const char *name) {
    if (mk_tmpdir(dir, len)) return -1;
    join(path, plen, dir, name);
    return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

void rm_tree(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

void join(char *out, size_t len, const char *dir, const char *name) {
    snprintf(out, len, "%s/%s", dir, name);
}

int file_exists(const char *dir, const char *name) {
    char p[4096];
    join(p, sizeof p, dir, name);
    return access(p, F_OK) == 0;
}

/* Whole file as a NUL-terminated string ("" when unreadable); caller frees. */
char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *s = NULL;
    size_t n = 0, cap = 0;
    if (f) {
        char buf[4096];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
            if (n + r + 1 > cap) {
                cap = (n + r + 1) * 2;
                s = realloc(s, cap);
                if (!s) abort();
            }
            memcpy(s + n, buf, r);
            n += r;
        }
        fclose(f);
    }
    if (!s) s = calloc(1, 1);
    else s[n] = '\0';
    return s;
}

/* Write a .npy file from raw parts: format major version, header text (used as is),
 * data bytes. For headers the writer never produces. */
void write_raw(const char *path, int major, const char *header, const void *data, size_t nbytes) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    size_t hl = strlen(header);
    unsigned char pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (unsigned char)major, 0};
    size_t np;
    if (major == 1) {
        pre[8] = (unsigned char)(hl & 0xff), pre[9] = (unsigned char)(hl >> 8);
        np = 10;
    } else {
        for (int i = 0; i < 4; i++) pre[8 + i] = (unsigned char)(hl >> (8 * i));
        np = 12;
    }
    fwrite(pre, 1, np, f);
    fwrite(header, 1, hl, f);
    if (nbytes) fwrite(data, 1, nbytes, f);
    fclose(f);
}

/* Run `chunkgen args...` with stdout/stderr to dir/stdout.txt, dir/stderr.txt; the exit code. */
int run_cli_hook(const char *dir, const char *const *args, int timeout_s, void (*pre)(void *), void *arg) {
    char outp[4096], errp[4096];
    join(outp, sizeof outp, dir, "stdout.txt");
    join(errp, sizeof errp, dir, "stderr.txt");
    const char *argv[32];
    int n = 0;
    argv[n++] = CG_CLI_PATH;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        if (pre) pre(arg);
        if (timeout_s > 0) alarm((unsigned)timeout_s); /* survives execv: a hang is killed by SIGALRM */
        execv(CG_CLI_PATH, (char *const *)argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int run_cli_t(const char *dir, const char *const *args, int timeout_s) {
    return run_cli_hook(dir, args, timeout_s, NULL, NULL);
}

int run_cli(const char *dir, const char *const *args) { return run_cli_hook(dir, args, 0, NULL, NULL); }

char *cli_stderr(const char *dir) {
    char p[4096];
    join(p, sizeof p, dir, "stderr.txt");
    return slurp(p);
}

void write_npy(const char *dir, const char *name, const cg_tbuf *b) {
    char p[4096], err[512], file[64];
    snprintf(file, sizeof file, "%s.npy", name);
    join(p, sizeof p, dir, file);
    if (cg_npy_write(p, (const float *)b->mem, b->t.ndim, b->t.shape, err, sizeof err) != 0)
        cg_test_fail(__FILE__, __LINE__, "cg_npy_write: %s", err);
}
