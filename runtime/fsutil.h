/* fsutil.h -- the one set of file helpers for every file chunkgen reads or writes in its
 * caches and for the CLI's outputs: mkdir -p, opening a file that must be regular
 * without ever blocking on a FIFO or a device, and atomic writes through a temp file
 * that a planted symlink cannot redirect.
 *
 * Temp files are "<dir>/.tmp.<host>.<pid>.<16 hex>.<final name>", created with
 * O_CREAT|O_EXCL|O_NOFOLLOW in the final file's directory (so rename is atomic, also on
 * NFS); `chunkgen cache prune` recognises (and removes) stale ones by that pattern. */
#ifndef CG_FSUTIL_H
#define CG_FSUTIL_H

#include <stddef.h>
#include <stdint.h>

/* mkdir -p path (mode 0755). 0 on success (also when it exists as a directory), else
 * an errno value (ENOTDIR when path or a parent is not a directory). */
int cg__mkdirs(const char *path);

/* Open path read-only without blocking (O_NONBLOCK, then cleared) and check it is a
 * regular file of at most max_bytes (0: no limit). Returns the fd, or -1 with errno set
 * (ENOENT for a missing file) and the reason in why ("cannot open: ...", "not a regular
 * file (a FIFO)", "larger than ..."). *size (when not NULL) gets the size. */
int cg__open_regular(const char *path, int64_t max_bytes, int64_t *size, char *why, size_t whycap);

/* The whole regular file at path (cg__open_regular's checks, at most max_bytes; 0: no
 * limit), NUL-terminated, malloc'd; *len (when not NULL) its length. NULL with errno set
 * and the reason in why when it cannot be opened or read. */
char *cg__read_regular(const char *path, int64_t max_bytes, size_t *len, char *why, size_t whycap);

/* Create a new temp file next to final_path (see above): returns the fd (O_WRONLY) and
 * its path in tmp, or -1 with errno set. Never follows a symlink, never reuses a file. */
int cg__tmp_create(const char *final_path, char *tmp, size_t tmpcap);

/* Write all n bytes to fd (retrying short writes and EINTR). 0, or -1 with errno. */
int cg__write_all(int fd, const void *data, size_t n);

/* fsync (when durable) and close fd, then rename tmp over final_path; on any failure
 * the temp file is removed. 0, or -1 with errno set. */
int cg__tmp_commit(int fd, const char *tmp, const char *final_path, int durable);

/* Atomic write of data to path: cg__tmp_create + cg__write_all + cg__tmp_commit (and
 * an fsync of the directory when durable, best effort). 0, or -1 with the reason
 * (naming the file) in why and errno set. */
int cg__write_file_atomic(const char *path, const void *data, size_t n, int durable, char *why, size_t whycap);

/* 1 when name (no directory) is one of chunkgen's temp file names (".tmp.*"). */
int cg__is_tmp_name(const char *name);

/* First line of the compiler logs the emulator keeps in <cache>/emu-failed/ (so that
 * `chunkgen cache clear --all` knows them as chunkgen's). */
#define CG_EMU_FAILED_LOG_MARK "chunkgen emulate: compiler output"

/* Human name of a file type from st_mode ("a FIFO", "a directory", ...). */
const char *cg__file_type_name(unsigned mode);

#endif /* CG_FSUTIL_H */
