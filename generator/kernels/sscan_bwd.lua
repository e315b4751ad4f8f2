-- sscan_bwd.lua -- the selective-scan backward kernels (templates/sscan_bwd.cu): space,
-- constraints, default and launch geometry. Thread layout and shared checks come from
-- sscan_fwd.lua. launch() gives every launch fact: the passes, the named workspace
-- regions of ws_floats() and the ordered arguments (with the grads pass's work split
-- of work()); the C side copies them.
--
-- Compile-time shape: N and G, as the forward.
--
-- Passes (templates/sscan_bwd.cu has the math):
--   seq  states (B * nblk CTAs, each over all of L: checkpoints forward, state
--        gradients at the segment ends backward), grads, reduce;
--   par  for small B * D, parallel over time: local (B * nblk * nseg CTAs: each segment
--        from zero, forward and backward), carry (per (b, d, n) across segments),
--        grads, reduce.
-- grads, parallel over (b, segment, group unit, split) in both strategies, writes dx,
-- ddelta, dz and sums dB/dC over each group's channels inside one CTA.

local F = require("kernels.sscan_fwd").lib
local ceil_div, layout, nblk, varlen, rows = F.ceil_div, F.layout, F.nblk, F.varlen, F.rows

local SPLIT_TARGET = 1024      -- CG_SSCAN_SPLIT_TARGET of templates/sscan_params.h
local SPLIT_MAX = 8            -- CG_SSCAN_SPLIT_MAX
local GRADS_WARPS_PER_SM = 8   -- resident warps per SM the grads grid aims at
local HB_SMEM_MAX = 96 * 1024  -- a grads CTA keeps its segment's states in shared memory up to this

local function nseg(p, shape) return ceil_div(shape.L, p.segment) end

-- Bytes of one segment's recomputed states of a grads CTA ([SEG + 1][NPT][NT] floats);
-- kept in shared memory (CG_SSCAN_HB_SMEM) when at most HB_SMEM_MAX.
local function hb_bytes(p, shape)
  local nt, _, npt = layout(p, shape)
  return 4 * (p.segment + 1) * npt * nt
end
local function hb_smem(p, shape) return hb_bytes(p, shape) <= HB_SMEM_MAX end

-- Shared memory of the grads pass (mirrors M_FLOATS of sscan_bwd.cu) and of the state
-- passes (F_FLOATS of sscan_fwd.cu), bytes.
local function smem_grads(p, shape)
  local np = shape.N | 1
  local bc = p.chunk * F.groups_per_block(p, shape) * shape.N
  return 4 * (4 * p.chunk * p.dim_block + 2 * bc + 2 * p.chunk * p.dim_block * np)
    + (hb_smem(p, shape) and hb_bytes(p, shape) or 0)
end
local function smem_states(p, shape) return F.smem_bytes(p, shape) end

-- Work of the grads pass (arguments of the kernels): units of gpu whole
-- groups (about one block of small groups, or one group), each unit's blocks split into
-- nsplit runs (only for groups of several blocks; never more runs than the fewest
-- blocks a group meets, so no run is empty).
local function work(p, shape)
  local dpg = shape.D // shape.G
  local gpu = math.max(1, p.dim_block // dpg)
  local nunit = ceil_div(shape.G, gpu)
  local items = shape.B * nseg(p, shape) * nunit
  local nsplit = 1
  if gpu == 1 then
    nsplit = math.max(1, math.min(SPLIT_MAX, ceil_div(dpg, p.dim_block), ceil_div(SPLIT_TARGET, items)))
  end
  return { gpu = gpu, nunit = nunit, nsplit = nsplit, nwork = items * nsplit }
end

-- CTAs of the grads pass: every item, up to GRADS_WARPS_PER_SM warps per SM; each CTA
-- owns one segment's state buffer, so this caps that buffer independently of the shape.
local function grads_cap(p, dev)
  return math.max(1, dev.sm_count) * math.max(1, GRADS_WARPS_PER_SM // p.warps)
end
local function grads_ctas(p, shape, dev) return math.min(work(p, shape).nwork, grads_cap(p, dev)) end

local function r4(n) return (n + 3) // 4 * 4 end

-- dB and dC go through the float partials pB, pC and the reduce pass: when split, and
-- when either is stored in 16 bits (BC_PARTIAL of the template: rounded once there).
local function bc_partials(p, shape)
  local dts = shape.dtypes or "" -- "name=dtype" words of the 16-bit tensors (core.lua)
  return work(p, shape).nsplit > 1 or dts:find("%f[%w_]dB=") ~= nil or dts:find("%f[%w_]dC=") ~= nil
end

-- Workspace regions in floats, in order (each rounded up to 16 bytes), named as the
-- members of cg_sscan_bwd_params in templates/sscan_params.h.
local REGIONS = { "ckpt", "gst", "sdt", "hbuf", "pB", "pC", "pA", "pD", "pbias" }
local function ws_floats(p, shape, dev)
  local nt, _, npt = layout(p, shape)
  local per = npt * nt
  local bblk = shape.B * nblk(p, shape)
  local ns = nseg(p, shape)
  local w = work(p, shape)
  local bc = bc_partials(p, shape) and shape.B * shape.L * shape.G * w.nsplit * shape.N or 0
  return {
    r4(bblk * ns * per),                                    -- ckpt
    r4(bblk * ns * per),                                    -- gst
    -- sdt (varlen: then the sums over each segment's head, templates/sscan_bwd.cu)
    p.strategy == "par" and r4(bblk * ns * p.dim_block * (varlen(shape) and 2 or 1)) or 0,
    hb_smem(p, shape) and 0 or r4(grads_ctas(p, shape, dev) * (p.segment + 1) * per), -- hbuf
    r4(bc), r4(bc),                                         -- pB, pC
    r4(shape.B * ns * shape.D * shape.N),                   -- pA
    r4(shape.B * ns * shape.D), r4(shape.B * ns * shape.D), -- pD, pbias
  }
end

-- Elements of the reduce launch: dB and dC from the partials (bc_partials), dA, then dD
-- and ddelta_bias.
local function reduce_items(p, shape)
  local bc = bc_partials(p, shape) and shape.B * shape.L * shape.G * shape.N or 0
  return bc + shape.D * shape.N + shape.D
end

local function valid(p, shape, dev)
  local ok, why = F.common_valid(p, shape, dev)
  if not ok then return false, why end
  if p.segment % p.chunk ~= 0 then return false, "segment must be a multiple of chunk" end
  -- A segment much longer than L only grows the per-CTA state buffer.
  if p.segment > 32 and p.segment >= 2 * shape.L then
    return false, string.format("segment %d: half of it covers L = %d", p.segment, shape.L)
  end
  local ns = nseg(p, shape)
  if p.strategy == "par" then
    if ns < 2 then
      return false, string.format("strategy par: L = %d is a single segment of %d steps", shape.L, p.segment)
    end
    local _, _, npt = layout(p, shape)
    if shape.B * nblk(p, shape) * math.max(ns, npt) > F.GRID_MAX then
      return false, "grid of B * blocks * segments (or states per lane) too large"
    end
  end
  local smem = math.max(smem_grads(p, shape), smem_states(p, shape))
  if smem > dev.smem_per_block then
    return false, string.format("needs %d bytes of shared memory, device allows %d", smem, dev.smem_per_block)
  end
  local nt = 32 * p.warps
  -- The kernels split these indices with 32-bit divisions.
  if reduce_items(p, shape) + nt > F.GRID_MAX then
    return false, "B * L * G * N + D * N + D must stay below 2^31 (indices of the reduction)"
  end
  if work(p, shape).nwork > F.GRID_MAX or shape.B * ns > F.GRID_MAX then
    return false, "B * segments * group units must stay below 2^31 (work items of the grads pass)"
  end
  return true
end

local function ws_total(p, shape, dev)
  local ws = 0
  for _, n in ipairs(ws_floats(p, shape, dev)) do ws = ws + n end
  return ws
end

-- Heuristic: chunk 4 and the forward's {dim_block 16, warps 4} (more warps per SM than
-- the earlier {32, 2}), the block changed until N fits the lanes; the segment with the least workspace (the checkpoints,
-- state gradients and dA partials, 3 B*D*N*L/segment floats, against the grads CTAs'
-- state buffers, segment * dim_block * N floats each; ties: the longer segment) among
-- those that keep at least half the grads parallelism of the shortest segment (up to
-- the grads grid's cap); par when the sequential state pass leaves most SMs idle and
-- time splits in 4 or more segments.
local function default(shape, dev)
  local p
  for _, bw in ipairs({ { 16, 4 }, { 32, 4 }, { 32, 2 }, { 8, 4 }, { 16, 2 }, { 64, 2 }, { 8, 2 }, { 16, 1 },
                         { 32, 1 }, { 64, 4 }, { 8, 1 } }) do
    local c = { chunk = 4, dim_block = bw[1], warps = bw[2], segment = 32, strategy = "seq" }
    if valid(c, shape, dev) then p = c; break end
  end
  if not p then return { chunk = 4, dim_block = 16, warps = 4, segment = 32, strategy = "seq" } end
  local best
  local par_need = math.min(work(p, shape).nwork, grads_cap(p, dev))
  for _, s in ipairs({ 32, 64, 128, 256 }) do
    local c = { chunk = p.chunk, dim_block = p.dim_block, warps = p.warps, segment = s, strategy = "seq" }
    if valid(c, shape, dev) and (s == 32 or 2 * work(c, shape).nwork >= par_need) then
      local ws = ws_total(c, shape, dev)
      if not best or ws <= best.ws then best = { p = c, ws = ws } end
    end
  end
  p = best.p
  local q = { chunk = p.chunk, dim_block = p.dim_block, warps = p.warps, segment = p.segment, strategy = "par" }
  if rows(shape) * nblk(p, shape) * 2 < dev.sm_count and nseg(q, shape) >= 4 and valid(q, shape, dev) then
    return q
  end
  return p
end

-- cg_sscan_bwd_params: inputs (D, z, delta_bias, h0, dhT optional), outputs (dD, dz,
-- ddelta_bias, dh0 optional).
local TENSORS = { "x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0", "dy", "dhT",
                  "dx", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias", "dh0" }

local function launch(p, shape, dev)
  local nt = 32 * p.warps
  local _, _, npt = layout(p, shape)
  local bblk = shape.B * nblk(p, shape)
  local smem_s = smem_states(p, shape)
  local regions, args = {}, F.tensor_args(TENSORS)
  for i, n in ipairs(ws_floats(p, shape, dev)) do
    regions[i] = { REGIONS[i], 4 * n }
    args[#args + 1] = { ws = REGIONS[i] }
  end
  local w = work(p, shape)
  for _, v in ipairs({ w.gpu, w.nunit, w.nsplit, w.nwork }) do args[#args + 1] = { int = v } end
  F.dims_args(args, p, shape, p.segment, nseg(p, shape))
  local tail = {
    { entry = "cg_sscan_bwd_grads", grid = { grads_ctas(p, shape, dev), 1, 1 }, block = { nt, 1, 1 },
      smem = smem_grads(p, shape) },
    { entry = "cg_sscan_bwd_reduce", grid = { ceil_div(reduce_items(p, shape), nt), 1, 1 }, block = { nt, 1, 1 },
      smem = 0 },
  }
  local head
  if p.strategy == "seq" then
    -- varlen: one CTA per (sequence, channel block)
    head = { { entry = "cg_sscan_bwd_states", grid = { rows(shape) * nblk(p, shape), 1, 1 }, block = { nt, 1, 1 },
               smem = smem_s } }
  else
    head = {
      { entry = "cg_sscan_bwd_local", grid = { bblk * nseg(p, shape), 1, 1 }, block = { nt, 1, 1 }, smem = smem_s },
      { entry = "cg_sscan_bwd_carry", grid = { bblk * npt, 1, 1 }, block = { nt, 1, 1 }, smem = 0 },
    }
  end
  for _, l in ipairs(tail) do head[#head + 1] = l end
  return head, regions, args
end

return {
  name = "sscan_bwd",
  op = "sscan_bwd",
  template = "sscan_bwd.cu",
  consts = { "N", "G" },
  -- tensors that may be bf16 / f16 (CG_T_<NAME> of the template)
  half = { "x", "delta", "B", "C", "z", "dy", "dx", "ddelta", "dB", "dC", "dz" },
  space = {
    chunk = { 4, 8 },
    dim_block = { 8, 16, 32, 64 },
    warps = { 1, 2, 4 },
    segment = { 32, 64, 128, 256 },
    strategy = { "seq", "par" },
  },
  order = { "chunk", "dim_block", "warps", "segment", "strategy" },
  abbrev = { dim_block = "bd" },
  valid = valid,
  default = default,
  launch = launch,
  defines = function(p, shape, dev)
    return F.varlen_defines(shape, { CG_SMEM_BYTES = smem_grads(p, shape), CG_SSCAN_HB_SMEM = hb_smem(p, shape) and 1 or 0 })
  end,
}
