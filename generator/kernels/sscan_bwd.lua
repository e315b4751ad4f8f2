-- sscan_bwd.lua -- the selective-scan backward kernels (templates/sscan_bwd.cu): space,
-- constraints, default and launch geometry. Thread layout and shared checks come from
-- sscan_fwd.lua. runtime/launch_sscan.c splits the workspace with the same formulas as
-- ws_floats() below; keep the two in step.

local F = require("kernels.sscan_fwd").lib
local ceil_div, layout, nblk = F.ceil_div, F.layout, F.nblk

-- Shared memory of the main pass (mirrors M_FLOATS of sscan_bwd.cu) and of the
-- checkpoint pass (F_FLOATS of sscan_fwd.cu), bytes.
local function smem_main(p, shape)
  local np = shape.N | 1
  return 4 * (4 * p.chunk * p.dim_block + 2 * p.chunk * p.dim_block * np)
end
local function smem_ckpt(p) return 4 * 3 * p.chunk * p.dim_block end

-- Partial slots per group: the most channel blocks a group of D/G channels can meet.
local function nbg(p, shape)
  local dpg = shape.D // shape.G
  return math.min(nblk(p, shape), (dpg - 1) // p.dim_block + 2)
end

local function r4(n) return (n + 3) // 4 * 4 end

-- Workspace regions in floats, in order (each rounded up to 16 bytes).
local function ws_floats(p, shape)
  local nt, _, npt = layout(p, shape)
  local ctas = shape.B * nblk(p, shape)
  local nseg = ceil_div(shape.L, p.segment)
  local per = npt * nt
  local bc = shape.B * shape.L * shape.G * nbg(p, shape) * shape.N
  return {
    r4(ctas * nseg * per),             -- ckpt
    r4(ctas * (p.segment + 1) * per),  -- hbuf
    r4(ctas * p.segment * p.dim_block),-- dybuf
    r4(bc), r4(bc),                    -- pB, pC
    r4(shape.B * shape.D * shape.N),   -- pA
    r4(shape.B * shape.D), r4(shape.B * shape.D), -- pD, pbias
  }
end

local function valid(p, shape, dev)
  local ok, why = F.common_valid(p, shape, dev)
  if not ok then return false, why end
  if p.segment % p.chunk ~= 0 then return false, "segment must be a multiple of chunk" end
  -- A segment much longer than L only grows the per-CTA state buffer.
  if p.segment > 32 and p.segment >= 2 * shape.L then
    return false, string.format("segment %d: half of it covers L = %d", p.segment, shape.L)
  end
  local smem = math.max(smem_main(p, shape), smem_ckpt(p))
  if smem > dev.smem_per_block then
    return false, string.format("needs %d bytes of shared memory, device allows %d", smem, dev.smem_per_block)
  end
  local nt = 32 * p.warps
  local items = shape.B * shape.L * shape.G * shape.N + shape.D * shape.N + shape.D
  if items + nt > F.GRID_MAX then
    return false, "B * L * G * N + D * N + D must stay below 2^31 (indices of the reduction)"
  end
  return true
end

-- Heuristic: the seeds' tuned backward {chunk 4, dim_block 32, warps 2, segment 256},
-- with the segment near sqrt(L) (checkpoints B*D*N*L/segment against the per-CTA
-- buffer B*D*N*segment), and the block shrunk until N fits the lanes.
local function default(shape, dev)
  local seg = 32
  for _, s in ipairs({ 64, 128, 256 }) do
    if s * s <= shape.L then seg = s end
  end
  local p
  for _, bw in ipairs({ { 32, 2 }, { 32, 4 }, { 16, 4 }, { 8, 4 }, { 16, 2 }, { 64, 2 }, { 8, 2 }, { 16, 1 },
                         { 32, 1 }, { 64, 4 }, { 8, 1 } }) do
    local c = { chunk = 4, dim_block = bw[1], warps = bw[2], segment = seg }
    if valid(c, shape, dev) then p = c; break end
  end
  return p or { chunk = 4, dim_block = 32, warps = 2, segment = seg }
end

local function launch(p, shape, dev)
  local nt = 32 * p.warps
  local ctas = shape.B * nblk(p, shape)
  local items = shape.B * shape.L * shape.G * shape.N + shape.D * shape.N + shape.D
  local ws = 0
  for _, n in ipairs(ws_floats(p, shape)) do ws = ws + n end
  return {
    { entry = "cg_sscan_bwd_ckpt", grid = { ctas, 1, 1 }, block = { nt, 1, 1 }, smem = smem_ckpt(p) },
    { entry = "cg_sscan_bwd_main", grid = { ctas, 1, 1 }, block = { nt, 1, 1 }, smem = smem_main(p, shape) },
    { entry = "cg_sscan_bwd_reduce", grid = { ceil_div(items, nt), 1, 1 }, block = { nt, 1, 1 }, smem = 0 },
  }, 4 * ws
end

return {
  name = "sscan_bwd",
  op = "sscan_bwd",
  template = "sscan_bwd.cu",
  consts = { "N" },
  space = {
    chunk = { 2, 4, 8 },
    dim_block = { 8, 16, 32, 64 },
    warps = { 1, 2, 4 },
    segment = { 32, 64, 128, 256 },
  },
  order = { "chunk", "dim_block", "warps", "segment" },
  abbrev = { dim_block = "bd" },
  valid = valid,
  default = default,
  launch = launch,
  defines = function(p, shape, dev) return { CG_SMEM_BYTES = smem_main(p, shape) } end,
}
