-- ssd_fwd.lua -- the SSD forward kernel (templates/ssd_fwd.cu): its parameter space,
-- constraints, default and launch geometry. The template's traits block derives the
-- same shared-memory layout as smem_bytes() below; keep the two in step.

local function ceil_div(a, b) return (a + b - 1) // b end
local function round_up(a, b) return ceil_div(a, b) * b end

-- Dynamic shared memory of one CTA, in bytes (mirrors the traits block of ssd_fwd.cu).
local function smem_bytes(p, shape)
  local dkp = round_up(shape.dk, 16)
  local ldq, ldk = dkp + 4, dkp + 4
  local ldv, lds, ldp = p.block_dv + 8, p.block_dv + 8, p.chunk + 4
  local c = p.chunk
  local stage = c * ldq + c * ldk + c * ldv + c
  local floats = dkp * lds + c * ldp + 3 * c + p.stages * stage
  return 4 * floats
end

local function nchunks(p, shape) return ceil_div(shape.T, p.chunk) end
local function dv_tiles(p, shape) return ceil_div(shape.dv, p.block_dv) end

-- Registers per thread we budget for (ptxas reports 32-146 for the current code; the
-- 3xtf32 fragments with stages = 2 are the largest). Used to refuse blocks the SM could not hold.
local REGS_PER_THREAD = 168
local GRID_MAX = 2147483647
-- The default takes the three-phase strategy only when its chunk states fit in this.
local WS_DEFAULT_MAX = 1 << 30

local function valid(p, shape, dev)
  local threads = 32 * p.warps
  if shape.dk < 1 or shape.dv < 1 or shape.T < 1 or shape.B < 1 or shape.H < 1 or shape.G < 1 then
    return false, "empty shape"
  end
  if shape.H % shape.G ~= 0 then return false, "G must divide H" end
  if p.chunk % 16 ~= 0 then return false, "chunk must be a multiple of 16" end
  if p.block_dv % 16 ~= 0 then return false, "block_dv must be a multiple of 16" end
  if p.strategy == "3phase" and p.stages ~= 1 then
    return false, "3phase runs one chunk per CTA: stages must be 1"
  end
  if p.precision ~= "ieee" and dev.arch < 80 then
    return false, string.format("precision %s needs tf32 mma (sm_80+), device is sm_%d", p.precision, dev.arch)
  end
  -- A tile twice as wide as dv only multiplies zeros: half of it covers dv already.
  if p.block_dv > 16 and p.block_dv >= 2 * shape.dv then
    return false, string.format("block_dv %d: half of it covers dv = %d", p.block_dv, shape.dv)
  end
  -- Every warp should own at least one 16x16 tile of the largest matmul.
  local tiles = math.max((p.chunk // 16) * (p.block_dv // 16), ceil_div(shape.dk, 16) * (p.block_dv // 16))
  if p.warps > 2 and p.warps > tiles then
    return false, string.format("%d warps for %d output tiles", p.warps, tiles)
  end
  local smem = smem_bytes(p, shape)
  if smem > dev.smem_per_block then
    return false, string.format("needs %d bytes of shared memory, device allows %d", smem, dev.smem_per_block)
  end
  if threads * REGS_PER_THREAD > dev.regs_per_block then
    return false, string.format("%d threads x %d registers exceed the %d registers of a block", threads,
      REGS_PER_THREAD, dev.regs_per_block)
  end
  local ctas = dv_tiles(p, shape) * shape.B * shape.H
  if p.strategy == "3phase" then ctas = ctas * nchunks(p, shape) end
  if ctas > GRID_MAX then return false, string.format("grid of %d CTAs too large", ctas) end
  return true
end

-- Heuristic for untuned shapes: 64-token chunks, the narrowest dv tile covering dv (at
-- most 64), 4 warps, cp.async double buffering, fp32-accurate 3xtf32 on tensor cores
-- (ieee below sm_80), and the three-phase strategy when (b, h, dv tile) CTAs alone
-- would leave most SMs idle, there are enough chunks to spread, and the chunk states
-- (workspace) stay within WS_DEFAULT_MAX.
local function default(shape, dev)
  local p = { chunk = 64, block_dv = 64, warps = 4, stages = 2, strategy = "seq",
              precision = dev.arch >= 80 and "3xtf32" or "ieee" }
  for _, w in ipairs({ 16, 32, 64 }) do
    if shape.dv <= w then p.block_dv = w; break end
  end
  while p.chunk > 16 and p.chunk >= 2 * shape.T do p.chunk = p.chunk // 2 end
  local seq_ctas = dv_tiles(p, shape) * shape.B * shape.H
  local ws = 4 * shape.B * shape.H * nchunks(p, shape) * (shape.dk * shape.dv + 1)
  if seq_ctas * 2 < dev.sm_count and nchunks(p, shape) >= 4 and ws <= WS_DEFAULT_MAX then
    p.strategy, p.stages = "3phase", 1
  end
  -- Shrink until it fits: stages, then the chunk, then the dv tile.
  for _ = 1, 16 do
    if valid(p, shape, dev) then return p end
    if p.stages > 1 then p.stages = 1
    elseif p.chunk > 16 then p.chunk = p.chunk // 2
    elseif p.block_dv > 16 then p.block_dv = p.block_dv // 2
    elseif p.warps > 2 then p.warps = p.warps // 2
    else break end
  end
  return p
end

local function launch(p, shape, dev)
  local threads = 32 * p.warps
  local smem = smem_bytes(p, shape)
  local bh = shape.B * shape.H
  if p.strategy == "seq" then
    return { { entry = "cg_ssd_fwd_seq", grid = { dv_tiles(p, shape) * bh, 1, 1 }, block = { threads, 1, 1 },
               smem = smem } }, 0
  end
  local nc = nchunks(p, shape)
  local per_chunk = dv_tiles(p, shape) * nc * bh
  local elems = bh * shape.dk * shape.dv
  return {
    { entry = "cg_ssd_fwd_states", grid = { per_chunk, 1, 1 }, block = { threads, 1, 1 }, smem = smem },
    { entry = "cg_ssd_fwd_scan", grid = { ceil_div(elems, threads), 1, 1 }, block = { threads, 1, 1 }, smem = 0 },
    { entry = "cg_ssd_fwd_out", grid = { per_chunk, 1, 1 }, block = { threads, 1, 1 }, smem = smem },
  }, 4 * bh * nc * (shape.dk * shape.dv + 1) -- chunk states, then one decay per chunk
end

return {
  name = "ssd_fwd",
  template = "ssd_fwd.cu",
  op = "ssd_fwd",
  space = {
    chunk = { 16, 32, 64, 128 },
    block_dv = { 16, 32, 64 },
    warps = { 2, 4, 8 },
    stages = { 1, 2 },
    precision = { "ieee", "tf32", "3xtf32" },
    strategy = { "seq", "3phase" },
  },
  order = { "chunk", "block_dv", "warps", "stages", "precision", "strategy" },
  valid = valid,
  default = default,
  launch = launch,
  -- The template static_asserts its own layout against this number.
  defines = function(p, shape, dev) return { CG_SMEM_BYTES = smem_bytes(p, shape) } end,
}
