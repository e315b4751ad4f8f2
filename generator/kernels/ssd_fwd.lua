-- ssd_fwd.lua -- the SSD forward kernel (templates/ssd_fwd.cu): its parameter space,
-- constraints, default and launch geometry. The template's traits block derives the
-- same shared-memory layout as smem_bytes() below; keep the two in step.

local C = require("ssd_common")
local ceil_div, nchunks, dv_tiles, rows = C.ceil_div, C.nchunks, C.dv_tiles, C.rows

-- Row pitches in floats, as the traits block of ssd_fwd.cu derives them (bank-conflict-free
-- operand reads there): q, k +8, v +8, the state +4, the scores +4.
local function pitches(p, shape)
  local dkp = C.round_up(shape.dk, 16)
  return { dkp = dkp, ldq = dkp + 8, ldk = dkp + 8, ldv = p.block_dv + 8, lds = p.block_dv + 4, ldp = p.chunk + 4 }
end

-- Dynamic shared memory of one CTA, in bytes (mirrors the traits block of ssd_fwd.cu):
-- seq and 3phase out (state, scores, cumsums, stages of q, k, v, la).
local function smem_bytes(p, shape)
  local pt = pitches(p, shape)
  local c = p.chunk
  local stage = c * pt.ldq + c * pt.ldk + c * pt.ldv + c
  -- mma16: raw 16-bit copies of q and k per stage, pitch dkp + 8 halves (ssd_mma16.cuh)
  if p.precision == "mma16" then stage = stage + 2 * c * (pt.dkp + 8) // 2 end
  local floats = pt.dkp * pt.lds + c * pt.ldp + 3 * c + p.stages * stage
  return 4 * floats
end
-- 3phase states: cumsums, k, v, la (no state tile, scores or q).
local function smem_states(p, shape)
  local pt = pitches(p, shape)
  local c = p.chunk
  return 4 * (3 * c + c * pt.ldk + c * pt.ldv + c)
end

-- Registers per thread we budget for (ptxas reports 32-146 for the current code; the
-- 3xtf32 fragments with stages = 2 are the largest). Used to refuse blocks the SM could not hold.
local REGS_PER_THREAD = 168
-- The default takes the three-phase strategy only when its chunk states fit in this.
local WS_DEFAULT_MAX = 1 << 30

-- The operands of the scores Q K^T, the product precision=mma16 runs by m16n8k16.
local MMA16_INPUTS = { "q", "k" }

local function valid(p, shape, dev)
  local ok, why = C.check_shape(p, shape)
  if not ok then return false, why end
  if p.strategy == "3phase" and p.stages ~= 1 then
    return false, "3phase runs one chunk per CTA: stages must be 1"
  end
  ok, why = C.check_precision_tile(p, shape, dev)
  if not ok then return false, why end
  ok, why = C.check_precision_mma16(p, shape, dev, MMA16_INPUTS)
  if not ok then return false, why end
  local tiles = math.max((p.chunk // 16) * (p.block_dv // 16), ceil_div(shape.dk, 16) * (p.block_dv // 16))
  ok, why = C.check_warps(p, tiles)
  if not ok then return false, why end
  ok, why = C.check_block(p, dev, smem_bytes(p, shape), REGS_PER_THREAD)
  if not ok then return false, why end
  local ctas = dv_tiles(p, shape) * rows(shape) * shape.H
  if p.strategy == "3phase" then ctas = dv_tiles(p, shape) * shape.B * shape.H * nchunks(p, shape) end
  if ctas > C.GRID_MAX then return false, string.format("grid of %d CTAs too large", ctas) end
  return true
end

-- Heuristic for untuned shapes: 64-token chunks, the narrowest dv tile covering dv (at
-- most 64), 8 warps (two warp tiles of 32x32 or 16x32 per SM quadrant), cp.async double buffering, fp32-accurate 3xtf32 on tensor cores
-- (ieee below sm_80), and the three-phase strategy when (b, h, dv tile) CTAs alone
-- would leave most SMs idle, there are enough chunks to spread, and the chunk states
-- (workspace) stay within WS_DEFAULT_MAX.
local function default(shape, dev)
  local p = { chunk = 64, block_dv = 64, warps = 8, stages = 2, strategy = "seq",
              precision = dev.arch >= 80 and "3xtf32" or "ieee" }
  if dev.arch >= 80 and C.check_precision_mma16({ precision = "mma16" }, shape, dev, MMA16_INPUTS) then
    p.precision = "mma16" -- 16-bit q, k: the only precision valid() accepts
  end
  for _, w in ipairs({ 16, 32, 64 }) do
    if shape.dv <= w then p.block_dv = w; break end
  end
  while p.chunk > 16 and p.chunk >= 2 * shape.T do p.chunk = p.chunk // 2 end
  local seq_ctas = dv_tiles(p, shape) * rows(shape) * shape.H
  local ws = 4 * shape.B * shape.H * nchunks(p, shape) * (shape.dk * shape.dv + 1)
  if seq_ctas * 2 < dev.sm_count and nchunks(p, shape) >= 4 and ws <= WS_DEFAULT_MAX then
    p.strategy, p.stages = "3phase", 1
  end
  -- Shrink until it fits.
  return C.shrink(p, shape, dev, valid)
end

-- cg_ssd_fwd_params: inputs, then outputs (hT optional).
local TENSORS = { "q", "k", "v", "log_alpha", "h0", "o", "hT" }

local function launch(p, shape, dev)
  local threads = 32 * p.warps
  local smem = smem_bytes(p, shape)
  local bh = shape.B * shape.H
  local args = C.args(TENSORS, p, shape)
  if p.strategy == "seq" then -- varlen: one CTA per (sequence, h, dv tile)
    return { { entry = "cg_ssd_fwd_seq", grid = { dv_tiles(p, shape) * rows(shape) * shape.H, 1, 1 },
               block = { threads, 1, 1 }, smem = smem } }, { { "ws", 0 } }, args
  end
  local nc = nchunks(p, shape) -- varlen: the chunk slots (an unused one exits at once)
  local per_chunk = dv_tiles(p, shape) * nc * bh
  local elems = rows(shape) * shape.H * shape.dk * shape.dv -- the scan: per (sequence,) h, i, j
  return {
    { entry = "cg_ssd_fwd_states", grid = { per_chunk, 1, 1 }, block = { threads, 1, 1 },
      smem = smem_states(p, shape) },
    { entry = "cg_ssd_fwd_scan", grid = { ceil_div(elems, threads), 1, 1 }, block = { threads, 1, 1 }, smem = 0 },
    { entry = "cg_ssd_fwd_out", grid = { per_chunk, 1, 1 }, block = { threads, 1, 1 }, smem = smem },
  }, { { "ws", 4 * bh * nc * (shape.dk * shape.dv + 1) } }, -- chunk states, then one decay per chunk
  args
end

return {
  name = "ssd_fwd",
  template = "ssd_fwd.cu",
  op = "ssd_fwd",
  -- tensors that may be bf16 / f16 (CG_T_<NAME> of the template): widened as they are
  -- staged into the fp32 tiles (no extra shared memory), o rounded once at the store
  half = { "q", "k", "v", "o" },
  space = {
    chunk = { 16, 32, 64, 128 },
    block_dv = { 16, 32, 64 },
    warps = { 2, 4, 8 },
    stages = { 1, 2 },
    precision = { "ieee", "tf32", "3xtf32", "mma16" },
    strategy = { "seq", "3phase" },
  },
  order = { "chunk", "block_dv", "warps", "stages", "precision", "strategy" },
  valid = valid,
  default = default,
  launch = launch,
  -- The template static_asserts its own layout against this number.
  defines = function(p, shape, dev)
    return C.varlen_defines(shape, { CG_SMEM_BYTES = smem_bytes(p, shape), CG_SMEM_STATES = smem_states(p, shape) })
  end,
}
