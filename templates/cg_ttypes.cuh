// cg_ttypes.cuh -- the storage type of each tensor a kernel stages or stores: the
// generator's CG_T_<TENSOR> (cg_device.cuh: float, cg_bf16 or cg_f16), float when not
// defined. One default for every kernel; a kernel uses the names of its own tensors.
#ifndef CG_TTYPES_CUH
#define CG_TTYPES_CUH
#ifndef CG_T_B
#define CG_T_B float
#endif
#ifndef CG_T_BETA
#define CG_T_BETA float
#endif
#ifndef CG_T_C
#define CG_T_C float
#endif
#ifndef CG_T_CACHE
#define CG_T_CACHE float
#endif
#ifndef CG_T_DB
#define CG_T_DB float
#endif
#ifndef CG_T_DBETA
#define CG_T_DBETA float
#endif
#ifndef CG_T_DC
#define CG_T_DC float
#endif
#ifndef CG_T_DDELTA
#define CG_T_DDELTA float
#endif
#ifndef CG_T_DELTA
#define CG_T_DELTA float
#endif
#ifndef CG_T_DK
#define CG_T_DK float
#endif
#ifndef CG_T_DOUT
#define CG_T_DOUT float
#endif
#ifndef CG_T_DQ
#define CG_T_DQ float
#endif
#ifndef CG_T_DV
#define CG_T_DV float
#endif
#ifndef CG_T_DX
#define CG_T_DX float
#endif
#ifndef CG_T_DY
#define CG_T_DY float
#endif
#ifndef CG_T_DZ
#define CG_T_DZ float
#endif
#ifndef CG_T_K
#define CG_T_K float
#endif
#ifndef CG_T_O
#define CG_T_O float
#endif
#ifndef CG_T_Q
#define CG_T_Q float
#endif
#ifndef CG_T_V
#define CG_T_V float
#endif
#ifndef CG_T_X
#define CG_T_X float
#endif
#ifndef CG_T_Y
#define CG_T_Y float
#endif
#ifndef CG_T_Z
#define CG_T_Z float
#endif
#endif
