/* cli_testlib.h -- helpers of the CLI tests (tests/cli_testlib.c): temp directories,
 * whole files, raw .npy files and running the real `chunkgen` binary (CG_CLI_PATH). */
#ifndef CG_CLI_TESTLIB_H
#define CG_CLI_TESTLIB_H

#include <stddef.h>

#ifndef CG_CLI_PATH
#define CG_CLI_PATH "chunkgen"
#endif

/* mkdtemp under $TMPDIR (or /tmp) into buf; 0, or -1 with a test failure. */
int mk_tmpdir(char *buf, size_t len);
/* mk_tmpdir, and path = dir/name (a file the test writes there); 0, or -1 as mk_tmpdir. */
int mk_tmpdir_with(char *dir, size_t len, char *path, size_t plen, const char *name);
/* rm -r dir (does not follow symlinks). */
void rm_tree(const char *dir);
void join(char *out, size_t len, const char *dir, const char *name);
int file_exists(const char *dir, const char *name);
/* Whole file as a NUL-terminated string ("" when unreadable); caller frees. */
char *slurp(const char *path);
/* Write a .npy file from raw parts: format major version, header text (used as is),
 * data bytes. For headers the writer never produces. */
void write_raw(const char *path, int major, const char *header, const void *data, size_t nbytes);
/* dir/NAME.npy from b's float32 data (cg_npy_write); a test failure when it fails. */
struct cg_tbuf;
void write_npy(const char *dir, const char *name, const struct cg_tbuf *b);
/* Run `chunkgen args...` with stdout/stderr to dir/stdout.txt, dir/stderr.txt; the exit
 * code (128 + signal when killed). */
int run_cli(const char *dir, const char *const *args);
/* The same, killed by SIGALRM after timeout_s seconds (0: none): 128 + 14 on a hang. */
int run_cli_t(const char *dir, const char *const *args, int timeout_s);
/* The same with pre(arg) run in the child just before exec (it knows its pid there). */
int run_cli_hook(const char *dir, const char *const *args, int timeout_s, void (*pre)(void *), void *arg);
/* dir/stderr.txt of the last run_cli (caller frees). */
char *cli_stderr(const char *dir);

#endif
