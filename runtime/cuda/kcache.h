/* kcache.h -- the on-disk binary cache of compiled kernels (CUBIN for cuda, shared
 * objects for the emulator): one self-describing file per entry.
 *
 * Entry file "<label>-<32 hex of hash(key)>.cgk", little-endian:
 *   "CGKCACHE" | u32 format version | u32 0 | u64 key bytes | u64 payload bytes |
 *   u64 log bytes | key | payload | log | 16-byte hash of everything before it
 * The key is text naming everything the payload depends on (compiler build, options,
 * target, chunkgen version, the source itself); it is echoed back and compared on
 * read, so a hash collision cannot give a wrong binary.
 * Writers write a uniquely named temp file in the same directory, fsync it and
 * rename it into place (atomic on POSIX and NFS); readers take no lock. A corrupt,
 * truncated or mismatched entry is a miss, reported with one warning. */
#ifndef CG_KCACHE_H
#define CG_KCACHE_H

#include "internal.h"

#define CG_KCACHE_FORMAT 1
#define CG_KCACHE_FORMAT_STR "1" /* the same, as text (cache keys) */

/* 128-bit non-cryptographic hash (two 64-bit words). */
void cg__hash128(const void *data, size_t n, uint64_t out[2]);

/* Look up key in dir. CG_OK: *payload (malloc'd, *len bytes) and *log (malloc'd
 * text, may be "") returned. CG_ENOTFOUND: no usable entry (absent, or bad: then one
 * warning was printed and the entry is left for the caller's put to replace). */
cg_status cg__kcache_get(const char *dir, const char *label, const char *key, void **payload, size_t *len, char **log);

/* Store an entry (temp file + fsync + rename). CG_EIO when the directory cannot be
 * created or written: a warning is printed once per process and the caller goes on
 * memory-only. log may be NULL. */
cg_status cg__kcache_put(const char *dir, const char *label, const char *key, const void *payload, size_t len,
                         const char *log);

/* Path of key's entry in dir (for tests and tools). */
void cg__kcache_path(const char *dir, const char *label, const char *key, char *buf, size_t cap);

/* Check an entry file completely (magic, version, sizes, checksum). 0 when good; else
 * -1 with the reason in why. */
int cg__kcache_verify_file(const char *path, char *why, size_t whycap);

/* Parse an entry image in memory (as cg__kcache_verify_file checks a file): 0 and
 * pointers into data for the key, payload and log with their lengths; else -1 with
 * the reason in why. */
int cg__kcache_parse(const void *data, size_t n, const char **key, size_t *klen, const void **payload, size_t *plen,
                     const char **log, size_t *llen, char *why, size_t whycap);

/* Read an entry file whole (at most 4 GiB; not a FIFO or other special file): 0 and a
 * malloc'd *data of *len bytes, else -1 with the reason in why. */
int cg__kcache_read_file(const char *path, void **data, size_t *len, char *why, size_t whycap);

/* Number of entry files and their total bytes in dir (0, 0 when absent). */
void cg__kcache_stat(const char *dir, int64_t *files, int64_t *bytes);

#endif /* CG_KCACHE_H */
