// cg_qkv.cuh -- the storage types of q, k and v for the kernels that take them (SSD,
// gated delta rule, their decode steps): the generator's CG_T_Q, CG_T_K, CG_T_V
// (cg_device.cuh: float, cg_bf16 or cg_f16), float when not defined.
#ifndef CG_QKV_CUH
#define CG_QKV_CUH
#ifndef CG_T_Q
#define CG_T_Q float
#endif
#ifndef CG_T_K
#define CG_T_K float
#endif
#ifndef CG_T_V
#define CG_T_V float
#endif
#endif
