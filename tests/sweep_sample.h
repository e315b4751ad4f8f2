/* sweep_sample.h -- which configs of a kernel's space a sweep runs (the NVRTC sweeps and
 * the emulator sweeps against the float64 reference).
 *
 * A sweep builds the union of the configs its shapes accept (the Lua constraints decide)
 * and asks cg_sweep_select which of them to run. The one reader of the two variables:
 *   CHUNKGEN_TEST_SWEEP=full         every config (scripts/sweep-full.sh; run it before
 *                                    changing templates/ or generator/)
 *   CHUNKGEN_TEST_CONFIG_STRIDE=n    every n-th config (local iteration)
 *   neither (CI)                     the covering sample, at one of two strengths:
 *     - CG_SWEEP_PAIRS: every pair of values of every two keys that some config of the
 *       union has (precision x strategy, chunk x warps, ...): each 2-way interaction of
 *       the template's branches runs at least once;
 *     - CG_SWEEP_VALUES: every value of every key. For a variant of a kernel whose plain
 *       space a pairs sweep covers (its varlen build, its 16-bit storage where the
 *       precision does not change with it): the variant is one more factor, and every
 *       pair (variant, key = value) is what is new -- pairwise over the keys and the
 *       variant together;
 *     and at both strengths
 *     - the constraint boundary: for each integer key k and each value v it takes, when
 *       some config with k = v cannot step to the next larger (or smaller) value of k
 *       without leaving the union (a Lua constraint refuses it: shared memory,
 *       registers, warps against tiles, the grid), one such config runs;
 *   chosen greedily (most uncovered facts first, ties to the earlier config), so the
 *   sample is deterministic: the same union gives the same sample on every machine. */
#ifndef CG_SWEEP_SAMPLE_H
#define CG_SWEEP_SAMPLE_H

#include "internal.h"

typedef enum cg_sweep_strength { CG_SWEEP_PAIRS = 2, CG_SWEEP_VALUES = 1 } cg_sweep_strength;

typedef struct cg_sweep_sel {
    int n;               /* configs in the union */
    int nkept;           /* configs to run */
    unsigned char *keep; /* keep[i]: run config i */
    const char *mode;    /* "full", "stride", "pairs", "values" */
    int stride;          /* the stride of mode "stride" */
} cg_sweep_sel;

/* Select among cfgs[0..n) as the variables above say (the sample at strength st). Free with
 * cg_sweep_sel_free. */
void cg_sweep_select(const cg_cfg *const *cfgs, int n, cg_sweep_strength st, cg_sweep_sel *out);
/* The same over a contiguous array. */
void cg_sweep_select_array(const cg_cfg *cfgs, int n, cg_sweep_strength st, cg_sweep_sel *out);
void cg_sweep_sel_free(cg_sweep_sel *s);
/* 1 when config i runs (i out of range: 0). */
int cg_sweep_keeps(const cg_sweep_sel *s, int i);
/* "12 of 340 configs (sample)" into buf. */
const char *cg_sweep_describe(const cg_sweep_sel *s, char *buf, size_t cap);
/* 1 when a and b are the same config (the same keys and values in the same order). */
int cg_sweep_same_cfg(const cg_cfg *a, const cg_cfg *b);
/* 1 when list[0..n) holds c (cg_sweep_same_cfg). */
int cg_sweep_cfg_in(const cg_cfg *list, int n, const cg_cfg *c);
/* The union of the spaces space[0..ns) (nspace[i] configs each) in order of first
 * appearance, without the configs whose precision is not prec (NULL: every config), each
 * with its pick: a rotating choice among the spaces that hold it. Returns the count, with
 * *cfgs (pointers into the spaces) and *pick_of, which the caller frees (0 and NULLs when
 * out of memory). */
int cg_sweep_union(cg_cfg *const *space, const int *nspace, int ns, const char *prec, const cg_cfg ***cfgs,
                   int **pick_of);
/* 1 under CHUNKGEN_TEST_SWEEP=full (a test with its own notion of "all" reads this). */
int cg_sweep_full(void);

#endif
