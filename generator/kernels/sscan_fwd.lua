-- sscan_fwd.lua -- the selective-scan forward kernel (templates/sscan_fwd.cu): its
-- parameter space, constraints, default and launch geometry. sscan_bwd.lua reuses the
-- helpers exported in `lib` (thread layout, shared checks). The template's traits
-- derive the same layout and shared memory; keep the two in step.
--
-- Compile-time shape: N and G (CG_N, CG_G; ungrouped B/C arrive as G = 1 with group
-- stride 0, so one group needs no channel-to-group division). D, L, the strides and
-- the optional tensors (D, z, delta_bias, h0, hT; softplus) are run-time values of the
-- params struct: one module per (N, G, config) serves every such shape and flag.

local function ceil_div(a, b) return (a + b - 1) // b end

local GRID_MAX = 2147483647
local MAX_NPT = 16             -- states per lane kept in registers (bwd keeps 4 arrays of them)
local PIECE_CHUNKS = 16        -- CG_SSCAN_PIECE_CHUNKS of templates/sscan_params.h

-- Threads per CTA, lanes per channel, states per lane (tpc 0: does not divide).
local function layout(p, shape)
  local nt = 32 * p.warps
  if nt % p.dim_block ~= 0 then return nt, 0, 0 end
  local tpc = nt // p.dim_block
  return nt, tpc, ceil_div(shape.N, tpc)
end

local function nblk(p, shape) return ceil_div(shape.D, p.dim_block) end

-- Varlen (docs/varlen.md): shape.nseq > 0 sequences packed along L (B = 1). The kernels
-- then read cu_seqlens (CG_VARLEN); strategy seq grids over (sequence, channel block),
-- so its parallelism is nseq, not B.
local function varlen(shape) return (shape.nseq or 0) > 0 end
local function rows(shape) return varlen(shape) and shape.nseq or shape.B end

-- Checks shared by forward and backward.
local function common_valid(p, shape, dev)
  if shape.B < 1 or shape.L < 1 or shape.D < 1 or shape.N < 1 or shape.G < 1 then
    return false, "needs B, L, D, N, G >= 1"
  end
  if shape.N > 256 then return false, string.format("N = %d: at most 256 states", shape.N) end
  if shape.D % shape.G ~= 0 then return false, string.format("G = %d does not divide D = %d", shape.G, shape.D) end
  local nt, tpc, npt = layout(p, shape)
  if tpc < 1 then
    return false, string.format("%d threads cannot split evenly over dim_block %d channels", nt, p.dim_block)
  end
  if tpc > 32 then return false, string.format("%d lanes per channel: a channel's lanes must share a warp", tpc) end
  if npt > MAX_NPT then
    return false, string.format("%d states per lane (N = %d over %d lanes) exceed %d registers' worth: more warps or a smaller dim_block",
      npt, shape.N, tpc, MAX_NPT)
  end
  -- Lanes with no state only burn issue slots: a block twice as wide does the same
  -- work with them busy, when D has the channels and the space has that width.
  if tpc > 1 and tpc >= 2 * shape.N and p.dim_block < 64 and p.dim_block < shape.D then
    return false, string.format("%d lanes per channel for N = %d: half of them idle (dim_block %d, D = %d)",
      tpc, shape.N, p.dim_block, shape.D)
  end
  -- A block twice as wide as D only adds idle channels: half of it covers D.
  if p.dim_block > 8 and p.dim_block >= 2 * shape.D then
    return false, string.format("dim_block %d: half of it covers D = %d", p.dim_block, shape.D)
  end
  -- Kernels split indices below 2^31 with 32-bit divisions (64-bit offsets stay 64-bit).
  if shape.L > GRID_MAX or shape.D > GRID_MAX then return false, "L and D must be below 2^31" end
  if rows(shape) * nblk(p, shape) > GRID_MAX then return false, "grid of B (sequences) * channel blocks too large" end
  if varlen(shape) and shape.B ~= 1 then return false, "cu_seqlens: B must be 1" end
  return true
end

-- Groups of B and C one block of channels can meet (GB of the template).
local function groups_per_block(p, shape) return shape.G == 1 and 1 or math.min(shape.G, p.dim_block) end
-- Forward shared memory (F_FLOATS of the template): dt, x, y [chunk][dim_block], the
-- staged B and C rows [chunk][GB][N].
local function smem_bytes(p, shape)
  return 4 * (3 * p.chunk * p.dim_block + 2 * p.chunk * groups_per_block(p, shape) * shape.N)
end

local function npiece(p, shape) return ceil_div(shape.L, PIECE_CHUNKS * p.chunk) end

local function valid(p, shape, dev)
  local ok, why = common_valid(p, shape, dev)
  if not ok then return false, why end
  local smem = smem_bytes(p, shape)
  if smem > dev.smem_per_block then
    return false, string.format("needs %d bytes of shared memory, device allows %d", smem, dev.smem_per_block)
  end
  if p.strategy == "par" then
    local np = npiece(p, shape)
    if np < 2 then
      return false, string.format("strategy par: L = %d is a single piece of %d steps", shape.L, PIECE_CHUNKS * p.chunk)
    end
    if shape.B * nblk(p, shape) * np > GRID_MAX then return false, "grid of B * blocks * pieces too large" end
  end
  return true
end

local function first_valid(cands, shape, dev)
  for _, c in ipairs(cands) do
    if valid(c, shape, dev) then return c end
  end
  return nil
end

-- Heuristic: chunk 8 and {dim_block 16, warps 4} when it fits N (N = 16: 8 lanes of 2
-- states per channel, so B = 4, D = 1024-2048 fills 8-16 warps per SM of an H200;
-- the earlier {32, 2} kept 8 states per lane and ran 2-4 warps per SM), else the next
-- block whose lanes hold N; par when the sequential grid leaves most SMs idle and
-- time splits in 4 or more pieces.
local function default(shape, dev)
  local cands = {}
  for _, bw in ipairs({ { 16, 4 }, { 32, 4 }, { 32, 2 }, { 8, 4 }, { 16, 2 }, { 64, 2 }, { 8, 2 }, { 16, 1 },
                         { 32, 1 }, { 64, 4 }, { 8, 1 } }) do
    cands[#cands + 1] = { chunk = 8, dim_block = bw[1], warps = bw[2], strategy = "seq" }
  end
  local p = first_valid(cands, shape, dev) or cands[1]
  local q = { chunk = p.chunk, dim_block = p.dim_block, warps = p.warps, strategy = "par" }
  if rows(shape) * nblk(p, shape) * 2 < dev.sm_count and npiece(q, shape) >= 4 and valid(q, shape, dev) then
    return q
  end
  return p
end

-- Ordered arguments (templates/sscan_params.h): the op's tensors by their op-table names,
-- then (after what the caller puts between) the members of cg_sscan_dims.
local function tensor_args(names)
  local a = {}
  for _, t in ipairs(names) do a[#a + 1] = { tensor = t } end
  return a
end
local function dims_args(a, p, shape, segment, nseg)
  for _, s in ipairs({ "B", "L", "D", "N", "G" }) do a[#a + 1] = { sym = s } end
  for _, v in ipairs({ shape.D // shape.G, shape.softplus and 1 or 0, nblk(p, shape), segment, nseg }) do
    a[#a + 1] = { int = v }
  end
  if varlen(shape) then -- CG_SSCAN_VARLEN_ARGS
    a[#a + 1] = { cu = "cu_seqlens" }
    a[#a + 1] = { int = shape.nseq }
  end
  return a
end
-- Defines shared by both directions: CG_VARLEN for a varlen shape.
local function varlen_defines(shape, defs)
  if varlen(shape) then defs.CG_VARLEN = 1 end
  return defs
end

-- cg_sscan_fwd_params: inputs (D, z, delta_bias, h0 optional), outputs (hT optional).
local TENSORS = { "x", "delta", "A", "B", "C", "D", "z", "delta_bias", "h0", "y", "hT" }

local function launch(p, shape, dev)
  local nt, tpc, npt = layout(p, shape)
  local smem = smem_bytes(p, shape)
  local ctas = shape.B * nblk(p, shape)
  local args = tensor_args(TENSORS)
  args[#args + 1] = { ws = "ws" }
  if p.strategy == "seq" then
    ctas = rows(shape) * nblk(p, shape)
    return { { entry = "cg_sscan_fwd", grid = { ctas, 1, 1 }, block = { nt, 1, 1 }, smem = smem } },
      { { "ws", 0 } }, dims_args(args, p, shape, 0, 0)
  end
  local np = npiece(p, shape)
  local per = npt * nt
  return {
    { entry = "cg_sscan_fwd_local", grid = { ctas * np, 1, 1 }, block = { nt, 1, 1 }, smem = smem },
    { entry = "cg_sscan_fwd_carry", grid = { ceil_div(ctas * per, nt), 1, 1 }, block = { nt, 1, 1 }, smem = 0 },
    { entry = "cg_sscan_fwd_out", grid = { ctas * np, 1, 1 }, block = { nt, 1, 1 }, smem = smem },
  }, { { "ws", 4 * ctas * np * (per + p.dim_block) } }, -- piece states, then sums of dt
  dims_args(args, p, shape, PIECE_CHUNKS * p.chunk, np) -- segment: the piece length; nseg: pieces
end

return {
  name = "sscan_fwd",
  op = "sscan_fwd",
  template = "sscan_fwd.cu",
  consts = { "N", "G" },
  -- tensors that may be bf16 / f16 (CG_T_<NAME> of the template)
  half = { "x", "delta", "B", "C", "z", "y" },
  space = {
    chunk = { 4, 8, 16 },
    dim_block = { 8, 16, 32, 64 },
    warps = { 1, 2, 4 },
    strategy = { "seq", "par" },
  },
  order = { "chunk", "dim_block", "warps", "strategy" },
  abbrev = { dim_block = "bd" },
  valid = valid,
  default = default,
  launch = launch,
  defines = function(p, shape, dev) return varlen_defines(shape, { CG_SMEM_BYTES = smem_bytes(p, shape) }) end,
  -- for sscan_bwd.lua
  lib = { layout = layout, nblk = nblk, common_valid = common_valid, ceil_div = ceil_div, GRID_MAX = GRID_MAX,
          tensor_args = tensor_args, dims_args = dims_args, varlen = varlen, rows = rows,
          varlen_defines = varlen_defines,
          smem_bytes = smem_bytes, groups_per_block = groups_per_block },
}
