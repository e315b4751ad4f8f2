/* sscan_cpu.h -- what the selective scan's CPU path (sscan_cpu.c, built per ISA variant)
 * shares with its parameter defaults (sscan_cpu_params.c, built once). */
#ifndef CG_SSCAN_CPU_H
#define CG_SSCAN_CPU_H

#include "cpu_half.h" /* cpu_isa.h; bf16 / fp16 rows */

/* x / delta / z laid out sequence-contiguous ([B, D, L] memory, mamba's layout). */
static inline int cg__sscan_seq_major(const cg_sscan_prob *p) { return p->x.s[1] == 1 && p->x.s[2] != 1; }

#endif /* CG_SSCAN_CPU_H */
