/* ptxas_log.h -- resource usage parsed from a ptxas -v log (the NVRTC tests check
 * registers, spills and shared memory of every config). Test code, not the library. */
#ifndef CG_TEST_PTXAS_LOG_H
#define CG_TEST_PTXAS_LOG_H

#include <stdint.h>

/* Resource usage parsed from a ptxas -v log (the first function that has each line). */
typedef struct cg_ptxas_info {
    int found;              /* a "Used N registers" line was seen */
    int registers;
    int64_t smem;           /* static shared memory bytes */
    int64_t spill_stores, spill_loads, stack;
} cg_ptxas_info;
void cg__ptxas_parse(const char *log, cg_ptxas_info *out);

#endif
