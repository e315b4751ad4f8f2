-- gdr_bwd.lua -- the gated-delta-rule backward (templates/gdr_bwd.cu): its parameter
-- space, constraints, default and launch geometry (MATH_GDN.md section 3), float32 math.
-- Four launches:
--   prep    per (b, value head, chunk slot): as the forward's (gdr_common.cuh), also
--           storing A, the key Gram matrix and the gated query-key matrix;
--   state   per (sequence, value head, dv tile): the forward pass of the states (the
--           entering states, Vn), then the reverse pass from dhT: the state gradient at
--           each chunk's end, dVn; dh0;
--   grads   per (b, value head, chunk slot): dq, dk of the normalised q, k (to the
--           workspace), dv, dbeta, dg (the WY backward and the chunk-local reverse cumsum);
--   reduce  per (b, q/k head, chunk slot): dq, dk summed over the group's value heads in
--           order, through the L2 norm's backward.
-- The space (with `precision`: for 3xtf32 / mma16 the chunk GEMMs of prep, the state pass
-- and the grads pass on mma.sync; the triangular solve and the reduce pass float32 FMA),
-- workspace layout and constraints are the forward's (gdr_fwd.lua `lib`) plus the
-- backward's shared memory.

local fwd = require("kernels.gdr_fwd")
local lib = fwd.lib

local smem_state = lib.smem_state
local function smem_prep(p, shape) return lib.smem_prep(p, shape, true) end
-- grads: A, dP / dAmat / dLg, T1, dL [C][C]; 8 per-row columns; NT partial sums; the mma
-- precisions' row sums [C][dkp / 16] (gdr_bwd.cu GR_RS).
local function smem_grads(p, shape)
  local rs = lib.mma(p) and p.chunk * ((shape.dk + 15) // 16) or 0
  return 4 * (4 * p.chunk * p.chunk + 8 * p.chunk + 32 * p.warps + rs)
end
-- state (both directions): the forward's, and for the mma precisions Q [C][dkp + 4] and a dO
-- tile [C][block_dv + 4] (gdr_bwd.cu RS_FLOATS).
local function smem_rstate(p, shape)
  return smem_state(p, shape) + (lib.mma(p) and 4 * (lib.kt(p, shape) + p.chunk * (p.block_dv + 4)) or 0)
end

local function valid(p, shape, dev)
  local ok, why = fwd.valid(p, shape, dev)
  if not ok then return false, why end
  return lib.fits_smem({ smem_grads(p, shape), smem_prep(p, shape), smem_rstate(p, shape) }, dev)
end

local function default(shape, dev)
  return lib.first_valid(valid, shape, dev, { chunk = 32, block_dv = 32, warps = 4 })
end

-- cg_gdr_bwd_params (templates/cg_kernel_params.h), in order.
local TENSORS = { "q", "k", "v", "g", "beta", "h0", "dout", "dhT", "dq", "dk", "dv", "dg", "dbeta", "dh0" }

local function workspace(p, shape)
  local n = shape.B * shape.H * lib.nslot(p, shape)
  local C, dk, dv = p.chunk, shape.dk, shape.dv
  return {
    { "gc", 4 * n * C }, { "rs", 4 * n * C * 2 }, { "w", 4 * n * C * dk }, { "u", 4 * n * C * dv },
    { "hs", 4 * n * dk * dv }, { "am", 4 * n * C * C }, { "kk", 4 * n * C * C }, { "pm", 4 * n * C * C },
    { "dhs", 4 * n * dk * dv }, { "dvn", 4 * n * C * dv }, { "dqp", 4 * n * C * dk }, { "dkp", 4 * n * C * dk },
  }
end

local function launch(p, shape, dev)
  local nt = 32 * p.warps
  local ns = lib.nslot(p, shape)
  local slots = shape.B * shape.H * ns
  local a = {}
  for _, t in ipairs(TENSORS) do a[#a + 1] = { tensor = t } end
  for _, r in ipairs(workspace(p, shape)) do a[#a + 1] = { ws = r[1] } end
  for _, s in ipairs({ "B", "T", "G", "H" }) do a[#a + 1] = { sym = s } end
  a[#a + 1] = { real = "scale" }
  a[#a + 1] = { int = ns }
  a[#a + 1] = { int = lib.ndvt(p, shape) }
  if lib.varlen(shape) then
    a[#a + 1] = { cu = "cu_seqlens" }
    a[#a + 1] = { int = shape.nseq }
  end
  return {
    { entry = "cg_gdr_bwd_prep", grid = { slots, 1, 1 }, block = { nt, 1, 1 }, smem = smem_prep(p, shape) },
    { entry = "cg_gdr_bwd_state", grid = { lib.rows(shape) * shape.H * lib.ndvt(p, shape), 1, 1 },
      block = { nt, 1, 1 }, smem = smem_rstate(p, shape) },
    { entry = "cg_gdr_bwd_grads", grid = { slots, 1, 1 }, block = { nt, 1, 1 }, smem = smem_grads(p, shape) },
    { entry = "cg_gdr_bwd_reduce", grid = { shape.B * shape.G * ns, 1, 1 }, block = { nt, 1, 1 }, smem = 0 },
  }, workspace(p, shape), a
end

local function defines(p, shape, dev)
  return lib.common_defines(p, shape, { CG_SMEM_GRADS = smem_grads(p, shape), CG_SMEM_RSTATE = smem_rstate(p, shape) }, true)
end

return {
  name = "gdr_bwd",
  op = "gdr_bwd",
  template = "gdr_bwd.cu",
  consts = { "dk", "dv", "l2norm" },
  half = { "q", "k", "v", "beta", "dout", "dq", "dk", "dv", "dbeta" },
  space = fwd.space,
  order = fwd.order,
  valid = valid,
  default = default,
  launch = launch,
  defines = defines,
}
