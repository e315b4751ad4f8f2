/* npy.h -- read and write NumPy .npy files of float arrays (for `chunkgen run`).
 *
 * Read: format versions 1.0, 2.0 and 3.0; dtype '<f4', '<f2' (float16), '<V2' (bfloat16:
 * numpy saves ml_dtypes.bfloat16 arrays as 2-byte void), or '<f8' converted to float32
 * (the reader says so in cg_npy.from_f64); fortran_order True is transposed into
 * row-major order; 0 to CG_NPY_MAX_DIMS dimensions. Anything else (big-endian,
 * integers, objects, structured dtypes, a file shorter or longer than its header
 * says) is an error whose message names the file and what was wrong.
 * Write: format 1.0, '<f4' (or '<f2', '<V2' with cg_npy_write_tmp_as), C order. Reads never block on a FIFO or device (the file must
 * be regular). */
#ifndef CG_NPY_H
#define CG_NPY_H

#include "chunkgen.h"

#include <stddef.h>
#include <stdint.h>

#define CG_NPY_MAX_DIMS 4

typedef struct cg_npy {
    float *data;       /* owned (cg_npy_free); row-major; never NULL after a read;
                                      * float32 values (16-bit ones widened exactly) */
    cg_tensor t;       /* the array as the library takes it, made from the file's
                                      * header: data, CG_F32, the header's rank and extents
                                      * (ndim, shape), contiguous row-major (zero strides) */
    int64_t count;     /* product of t.shape (1 for a 0-d array) */
    int from_f64;      /* the file held float64 values, rounded to float32 */
    int dtype;         /* the file's elements: CG_F32, CG_F64, CG_F16 or CG_BF16 */
    int fortran_order; /* the file was in Fortran order (transposed on read) */
    int version;       /* format major version of the file (1, 2 or 3) */
} cg_npy;

/* Read path into *out (zeroed first). 0 on success; -1 with a message in err
 * (naming path) on failure, *out then holds nothing to free. err may be NULL. */
int cg_npy_read(const char *path, cg_npy *out, char *err, size_t errlen);

/* Write a contiguous row-major float32 array of ndim (0..CG_NPY_MAX_DIMS) dims as a
 * version 1.0 file, atomically (a fresh temp file next to path, fsync, rename; a symlink
 * at the temp name is never followed). 0 on success; -1 with a message in err. */
int cg_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, char *err, size_t errlen);
/* The same, but leave the complete file at the temp path tmp (filled in) for the
 * caller to rename over path (or unlink): `chunkgen run` commits all outputs at once. */
int cg_npy_write_tmp(const char *path, char *tmp, size_t tmpcap, const float *data, int ndim, const int64_t *shape,
                     char *err, size_t errlen);

/* cg_npy_write_tmp with the elements stored as dtype: CG_F32 '<f4', CG_F16 '<f2' or
 * CG_BF16 '<V2' (read back with np.load(path).view(ml_dtypes.bfloat16)); 16-bit values
 * narrowed once, to nearest even (runtime/half.h). */
int cg_npy_write_tmp_as(const char *path, char *tmp, size_t tmpcap, const float *data, int dtype, int ndim,
                        const int64_t *shape, char *err, size_t errlen);

/* A 1-D index array (`chunkgen run --cu-seqlens`): its values widened to int64. */
typedef struct cg_npy_index {
    int64_t *v; /* owned (cg_npy_index_free) */
    int64_t n;
    int dtype; /* the file's elements: CG_I32 ('<i4') or CG_I64 ('<i8') */
} cg_npy_index;

/* Read a 1-D little-endian int32 or int64 .npy file into *out (zeroed first); the same
 * checks and messages as cg_npy_read, and any other dtype or rank is an error naming path. */
int cg_npy_read_index(const char *path, cg_npy_index *out, char *err, size_t errlen);
void cg_npy_index_free(cg_npy_index *a);

/* Release what cg_npy_read allocated; NULL or a zeroed struct is a no-op. */
void cg_npy_free(cg_npy *a);
/* mkdir -p path (mode 0755), for the directory the .npy files go to: 0 (also when it is a
 * directory already), else an errno value (ENOTDIR when path or a parent is not one). */
int cg_npy_mkdirs(const char *path);

/* Format a shape as Python does: "()", "(5,)", "(2, 3)". Returns buf. */
char *cg_npy_shape_str(int ndim, const int64_t *shape, char *buf, size_t buflen);

#endif /* CG_NPY_H */
