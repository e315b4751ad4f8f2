/* fsutil.c -- mkdir -p, non-blocking open of regular files, atomic writes (fsutil.h). */
#include "fsutil.h"

#include "chunkgen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cg__mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0) return ENOENT;
    if (n >= sizeof buf) return ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

const char *cg__file_type_name(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    }
    return "not a regular file";
}

int cg__open_regular(const char *path, int64_t max_bytes, int64_t *size, char *why, size_t whycap) {
    /* O_NONBLOCK: opening a FIFO without a writer (or a tty, a device) must not hang. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (why) snprintf(why, whycap, "cannot open: %s", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        if (why) snprintf(why, whycap, "cannot stat: %s", strerror(e));
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        if (why) snprintf(why, whycap, "not a regular file (%s)", cg__file_type_name((unsigned)st.st_mode));
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (max_bytes > 0 && (int64_t)st.st_size > max_bytes) {
        if (why) snprintf(why, whycap, "larger than %lld bytes (%lld)", (long long)max_bytes, (long long)st.st_size);
        close(fd);
        errno = EFBIG;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (int64_t)st.st_size;
    return fd;
}

static atomic_uint g_tmp_counter;

int cg__is_tmp_name(const char *name) { return !strncmp(name, ".tmp.", 5); }

int cg__tmp_create(const char *final_path, char *tmp, size_t tmpcap) {
    char host[64] = "host";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == '.') *c = '_';
    const char *slash = strrchr(final_path, '/');
    int dlen = slash ? (int)(slash - final_path) : 1;
    const char *dir = slash ? final_path : ".";
    const char *base = slash ? slash + 1 : final_path;
    if (slash == final_path) dlen = 0; /* "/name": the root directory */
    for (int attempt = 0; attempt < 16; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long r = ((unsigned long long)ts.tv_nsec << 20) ^ (unsigned long long)ts.tv_sec ^
                               ((unsigned long long)atomic_fetch_add(&g_tmp_counter, 1) << 44) ^
                               (unsigned long long)(uintptr_t)&ts;
        int w = snprintf(tmp, tmpcap, "%.*s/.tmp.%s.%ld.%016llx.%s", dlen, dir, host, (long)getpid(), r, base);
        if (w < 0 || (size_t)w >= tmpcap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

char *cg__read_regular(const char *path, int64_t max_bytes, size_t *len, char *why, size_t whycap) {
    int64_t size = 0;
    int fd = cg__open_regular(path, max_bytes, &size, why, whycap);
    if (fd < 0) return NULL;
    size_t cap = (size_t)size, n = 0;
    char *buf = malloc(cap + 1);
    while (buf && n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            if (why && whycap) snprintf(why, whycap, "cannot read: %s", strerror(e));
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0) break; /* shrank while reading: what is there */
        n += (size_t)r;
    }
    close(fd);
    if (!buf) {
        if (why && whycap) snprintf(why, whycap, "out of memory for %lld bytes", (long long)size);
        errno = ENOMEM;
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int cg__write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int cg__tmp_commit(int fd, const char *tmp, const char *final_path, int durable) {
    int e = 0;
    if (durable && fsync(fd) != 0 && errno != EINVAL) e = errno;
    if (close(fd) != 0 && !e) e = errno;
    if (!e && rename(tmp, final_path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int cg__write_file_atomic(const char *path, const void *data, size_t n, int durable, char *why, size_t whycap) {
    char tmp[4400];
    int fd = cg__tmp_create(path, tmp, sizeof tmp);
    if (fd < 0) {
        int e = errno;
        if (why) snprintf(why, whycap, "cannot create a temp file next to %s: %s", path, strerror(e));
        errno = e;
        return -1;
    }
    if (cg__write_all(fd, data, n) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        if (why) snprintf(why, whycap, "writing %s: %s", tmp, strerror(e));
        errno = e;
        return -1;
    }
    if (cg__tmp_commit(fd, tmp, path, durable) != 0) {
        int e = errno;
        if (why) snprintf(why, whycap, "writing %s (via %s): %s", path, tmp, strerror(e));
        errno = e;
        return -1;
    }
    if (durable) { /* make the rename durable (best effort) */
        char dir[4400];
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (slash == path ? 1 : (int)(slash - path)) : 1, slash ? path : ".");
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

/* The public names of the two helpers callers share (chunkgen_tune.h "files"). */
int cg_mkdirs(const char *path) { return cg__mkdirs(path); }
int cg_tmp_create(const char *final_path, char *tmp, size_t tmpcap) { return cg__tmp_create(final_path, tmp, tmpcap); }
