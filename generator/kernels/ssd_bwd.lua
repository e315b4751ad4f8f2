-- ssd_bwd.lua -- the SSD backward kernels (templates/ssd_bwd.cu): their parameter space,
-- constraints, default and launch geometry. The template's traits block derives the
-- same shared-memory layout as smem_states() and smem_grads() below; keep them in step.
--
-- Launches: chunk-local states (parallel over chunks), the forward and reverse scans over
-- chunks (chunk boundary states and their gradients, recomputed into the workspace:
-- nothing is stored per token), the per-chunk gradients (dlog_alpha included: it needs
-- nothing across chunks but those states), and with heads = "split" a finish. Grouped
-- dq/dk sum over the heads in a fixed order: heads = "loop" has one CTA per (b, group,
-- chunk) own the group's heads; heads = "split" runs one CTA per (b, head, chunk) into
-- per-head dq/dk buffers in the workspace, which the finish sums in head order (more
-- CTAs, T*dk floats per head).
--
-- recompute = chunks per stored state, memory against time. The scans keep the state
-- entering, and the state gradient leaving, every recompute-th chunk boundary only
-- (super-chunks of recompute chunks): 2*B*H*ceil(nchunks/recompute)*dk*dv floats of
-- workspace. Each grads CTA carries them to its own chunk through the other chunks of
-- its super-chunk (about recompute-1 extra [dk, block_dv] chunk matmuls per chunk and
-- dv tile). recompute = 1 stores every chunk boundary and recomputes nothing.

local C = require("ssd_common")
local ceil_div, nchunks, dv_tiles, rows = C.ceil_div, C.nchunks, C.dv_tiles, C.rows

-- Super-chunks: the chunk boundaries whose states the workspace keeps.
local function nsuper(p, shape) return ceil_div(nchunks(p, shape), p.recompute) end

-- Shared memory layouts (floats), mirroring the traits block of ssd_bwd.cu.
local function layout(p, shape)
  local pt = C.pitches(p, shape)
  local dkp, ldq, ldv, lds = pt.dkp, pt.ldq, pt.ldv, pt.lds
  local c = p.chunk
  local states = 2 * c * ldq + 2 * c * ldv + 4 * c
  local grads = states + 2 * c * ldq + c * pt.ldp + c * pt.lddp + dkp * lds + dkp * pt.ldd + c
  -- mma16: the grads launch's raw 16-bit q, k, v, dout (pitch width + 8 halves, ssd_mma16.cuh)
  if p.precision == "mma16" then grads = grads + c * (dkp + 8) + c * (p.block_dv + 8) end
  -- recompute > 1: the states launch sums a super-chunk's U and R in two [dkp, lds] tiles
  if p.recompute > 1 then states = states + 2 * dkp * lds end
  return states, grads
end
local function smem_states(p, shape) local s = layout(p, shape); return 4 * s end
local function smem_grads(p, shape) local _, g = layout(p, shape); return 4 * g end

-- A 16-bit dq or dk with several heads per group: heads=loop would round the running sum
-- over the heads once per head, so only heads=split (float partials, rounded once by the
-- finish) rounds it once.
local function half_grads_shared(shape)
  local dts = shape.dtypes or "" -- "name=dtype" words of the 16-bit tensors (core.lua)
  return shape.G < shape.H and (dts:find("%f[%w_]dq=") ~= nil or dts:find("%f[%w_]dk=") ~= nil)
end

local function scan_blocks(p, shape) return ceil_div(shape.dk * shape.dv, 32 * p.warps) end

-- Registers per thread we budget for (ptxas, sm_80 and sm_90: the grads kernel takes
-- 104-218 with recompute 1, the 3xtf32 one with block_dv 64 the largest, and up
-- to 244 with recompute 4, for its carry loops); refuses blocks an SM could not hold.
local REGS_PER_THREAD = 248

-- The operands of P = Q K^T and dP = dO V^T, the products precision=mma16 runs by m16n8k16.
local MMA16_INPUTS = { "q", "k", "v", "dout" }

local function valid(p, shape, dev)
  local threads = 32 * p.warps
  local ok, why = C.check_shape(p, shape)
  if not ok then return false, why end
  ok, why = C.check_precision_tile(p, shape, dev)
  if not ok then return false, why end
  ok, why = C.check_precision_mma16(p, shape, dev, MMA16_INPUTS)
  if not ok then return false, why end
  -- Varlen (ssd_common.lua): super-chunks of chunk slots would straddle sequences.
  if C.varlen(shape) and p.recompute ~= 1 then return false, "cu_seqlens: recompute must be 1" end
  if p.heads == "split" and shape.G == shape.H then
    return false, "heads=split: one head per group, nothing to split (heads=loop does the same)"
  end
  if p.heads == "loop" and half_grads_shared(shape) then
    return false, "heads=loop: a 16-bit dq or dk summed over the group's heads would be rounded per head (heads=split rounds once)"
  end
  -- A chunk twice as long as T only multiplies zeros, as a dv tile twice as wide as dv.
  if p.chunk > 16 and p.chunk >= 2 * shape.T then
    return false, string.format("chunk %d: half of it covers T = %d", p.chunk, shape.T)
  end
  -- Likewise a super-chunk twice as long as the sequence (with one chunk, recompute > 1
  -- would store the same single state as recompute = 1, only slower).
  if p.recompute > 1 and p.recompute >= 2 * nchunks(p, shape) then
    return false, string.format("recompute %d: half of it covers the %d chunks of T = %d", p.recompute,
      nchunks(p, shape), shape.T)
  end
  -- Every warp should own at least one 16x16 tile of the largest matmul.
  local mt, kt, nt = p.chunk // 16, ceil_div(shape.dk, 16), p.block_dv // 16
  local tiles = math.max(mt * nt + mt * mt + 2 * mt * kt, 2 * kt * nt)
  ok, why = C.check_warps(p, tiles)
  if not ok then return false, why end
  -- (plus the margin once taken for the static shared memory of the scan and finish
  -- kernels, which have none now: kept, so the valid configs stay what the tuned stores
  -- hold; the NVRTC test adds the largest static and the largest dynamic size of the module)
  ok, why = C.check_block(p, dev, smem_grads(p, shape) + 4 * threads + 16, REGS_PER_THREAD)
  if not ok then return false, why end
  local bh, nc = shape.B * shape.H, nchunks(p, shape)
  local grids = { dv_tiles(p, shape) * nsuper(p, shape) * bh, scan_blocks(p, shape) * rows(shape) * shape.H, nc * bh,
                  nc * shape.B * shape.G }
  for _, g in ipairs(grids) do
    if g > C.GRID_MAX then return false, string.format("grid of %d CTAs too large", g) end
  end
  return true
end

-- Heuristic for untuned shapes: the longest chunk up to 64 whose shared memory fits,
-- the narrowest dv tile covering dv (at most 32: the grads CTA loops over dv tiles),
-- 4 warps, fp32-accurate 3xtf32 on tensor cores (ieee below sm_80), and heads split
-- only when the group's CTAs alone would leave most SMs idle and the per-head buffers
-- stay within WS_SPLIT_MAX.
-- recompute: 1 (every chunk boundary stored, no extra work) while those stored states
-- (2*B*H*nchunks*dk*dv floats) take at most STATES_FLOOR or at most as much memory as
-- the backward's inputs q, k, v and dout together (so the workspace at most doubles
-- what the caller already holds); beyond both, the smallest value of the space whose
-- states fit that bound (else the largest valid one). The test is a ratio, so it hardly
-- depends on T: per token and head the states weigh 2*dk*dv/chunk floats against
-- 2*dk*G/H + 2*dv for the inputs. dk = dv = 128, G = H: chunk 64 stores all (equal
-- weights), chunk 32 (dk 128 does not fit chunk 64's shared memory) or G < H
-- takes 4 once the states pass STATES_FLOOR; dk = dv = 64 stores all.
local WS_SPLIT_MAX = 1 << 30
local STATES_FLOOR = 256 << 20
local RECOMPUTE = { 1, 4 }
local function states_bytes(p, shape) return 8 * shape.B * shape.H * nsuper(p, shape) * shape.dk * shape.dv end
local function inputs_bytes(shape) return 8 * shape.B * shape.T * (shape.G * shape.dk + shape.H * shape.dv) end
local function default(shape, dev)
  local forced = half_grads_shared(shape) -- heads=split only
  local p = { chunk = 64, block_dv = 32, warps = 4, heads = forced and "split" or "loop", recompute = 1,
              precision = dev.arch >= 80 and "3xtf32" or "ieee" }
  if dev.arch >= 80 and C.check_precision_mma16({ precision = "mma16" }, shape, dev, MMA16_INPUTS) then
    p.precision = "mma16" -- 16-bit q, k, v, dout: the only precision valid() accepts
  end
  if shape.dv <= 16 then p.block_dv = 16 end
  while p.chunk > 16 and p.chunk >= 2 * shape.T do p.chunk = p.chunk // 2 end
  -- Shrink until it fits (with heads = loop, valid for every G, or the forced split), then
  -- choose the heads from the final chunk count: a shorter chunk means more (b, group,
  -- chunk) CTAs.
  p = C.shrink(p, shape, dev, valid)
  if not forced and shape.G < shape.H and shape.B * shape.G * nchunks(p, shape) < 2 * dev.sm_count
      and 8 * shape.B * shape.H * shape.T * shape.dk <= WS_SPLIT_MAX then
    p.heads = "split"
    if not valid(p, shape, dev) then p.heads = "loop" end
  end
  local bound = math.max(STATES_FLOOR, inputs_bytes(shape))
  local pick = p.recompute
  for _, k in ipairs(RECOMPUTE) do
    p.recompute = k
    if valid(p, shape, dev) then
      pick = k
      if states_bytes(p, shape) <= bound then break end
    end
  end
  p.recompute = pick
  return p
end

-- cg_ssd_bwd_params: inputs (h0, dhT optional), then outputs (dh0 optional).
local TENSORS = { "q", "k", "v", "log_alpha", "h0", "dout", "dhT", "dq", "dk", "dv", "dlog_alpha", "dh0" }

local function launch(p, shape, dev)
  local threads = 32 * p.warps
  local bh, nc = shape.B * shape.H, nchunks(p, shape)
  local blk = { threads, 1, 1 }
  local ns = nsuper(p, shape)
  -- S, D [B*H, ns, dk, dv], gamma [B*H, ns] (varlen: nc, ns the chunk slots), and with
  -- heads = split the per-head dq, dk [B*H, T, dk]
  local rh = rows(shape) * shape.H
  local ws = 2 * bh * ns * shape.dk * shape.dv + bh * ns
  if p.heads == "split" then ws = ws + 2 * bh * shape.T * shape.dk end
  local grads_ctas = nc * (p.heads == "split" and bh or shape.B * shape.G)
  local launches = {
    { entry = "cg_ssd_bwd_states", grid = { dv_tiles(p, shape) * ns * bh, 1, 1 }, block = blk,
      smem = smem_states(p, shape) },
    { entry = "cg_ssd_bwd_scan", grid = { scan_blocks(p, shape) * rh, 1, 1 }, block = blk, smem = 0 },
    { entry = "cg_ssd_bwd_grads", grid = { grads_ctas, 1, 1 }, block = blk, smem = smem_grads(p, shape) },
  }
  if p.heads == "split" then -- the sums of the per-head dq, dk
    launches[#launches + 1] = { entry = "cg_ssd_bwd_finish", grid = { nc * shape.B * shape.G, 1, 1 }, block = blk,
                                smem = 0 }
  end
  return launches, { { "ws", 4 * ws } }, C.args(TENSORS, p, shape)
end

return {
  name = "ssd_bwd",
  template = "ssd_bwd.cu",
  op = "ssd_bwd",
  -- tensors that may be bf16 / f16 (CG_T_<NAME> of the template): q, k, v, dout widened
  -- as they are staged (no extra shared memory), dq, dk, dv rounded once at the store
  half = { "q", "k", "v", "dout", "dq", "dk", "dv" },
  space = {
    chunk = { 16, 32, 64 },
    block_dv = { 16, 32, 64 },
    warps = { 2, 4, 8 },
    precision = { "ieee", "tf32", "3xtf32", "mma16" },
    heads = { "loop", "split" },
    recompute = RECOMPUTE,
  },
  order = { "chunk", "block_dv", "warps", "precision", "heads", "recompute" },
  abbrev = { recompute = "rc" },
  valid = valid,
  default = default,
  launch = launch,
  -- The template static_asserts its own layout against these numbers.
  defines = function(p, shape, dev)
    return C.varlen_defines(shape, { CG_SMEM_STATES = smem_states(p, shape), CG_SMEM_GRADS = smem_grads(p, shape) })
  end,
}
