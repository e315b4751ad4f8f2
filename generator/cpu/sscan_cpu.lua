-- sscan_cpu.lua -- the parameter space of the selective-scan CPU path
-- (runtime/cpu/sscan_cpu.c), for the autotuner. Same convention as
-- generator/kernels/*.lua (see generator/core.lua) with backend = "cpu": no template
-- and no launch, the CPU path is C code configured at run time through the config keys
-- segment, block_d and threads. The generator core enumerates it (cg__gen_space) and
-- resolves its default (cg__gen_resolve); cg__gen_plan refuses it. shape.bwd is true
-- when tuning the backward, shape.seq_major when x/delta/z are sequence-contiguous;
-- dev.sm_count is the CPU thread count.
--
-- This space is what the tuner tries; ss_params (runtime/cpu/sscan_cpu.c) is the guard
-- for user pins and accepts a superset (segment in [1, 2^20], block_d in [1, 65536],
-- threads in [0, 4096]).

local C = require("cpu_common")

local SPACE = {
  segment = { 16, 32, 64, 128, 256 },           -- backward: steps between checkpointed states
  block_d = { 16, 32, 64, 128, 256 },           -- channels per task
  threads = { 0, 1, 2, 4, 8, 16, 32, 64, 128 }, -- 0: all of the context's threads
}

-- The backward's segment, rounded down to the space: its scratch holds 2 (segment + 1)
-- N 16 floats per lane chunk, kept within a few hundred KB of L2 for large N;
-- sequence-contiguous tensors (shape.seq_major, [B, D, L] memory) are read in longer
-- pieces per channel, so longer segments. The forward ignores segment; its configs all
-- carry this value.
local function default_segment(shape)
  local seg = shape.N <= 32 and ((shape.seq_major and shape.N <= 16) and 128 or 64) or math.max(16, 2048 // shape.N)
  local best = SPACE.segment[1]
  for _, s in ipairs(SPACE.segment) do
    if s <= seg then best = s end
  end
  return best
end

local function valid(p, shape, dev)
  if shape.D < 1 or shape.N < 1 or shape.L < 1 or shape.G < 1 or shape.D % shape.G ~= 0 then
    return false, "empty shape or G does not divide D"
  end
  if not shape.bwd then
    if p.segment ~= default_segment(shape) then return false, "segment only affects the backward" end
  elseif C.halves(p.segment, SPACE.segment, shape.L) then
    return false, string.format("segment %d: half of it covers L = %d", p.segment, shape.L)
  end
  local dg = shape.D // shape.G
  if p.block_d > 16 and p.block_d >= 2 * dg then
    return false, string.format("block_d %d: half of it covers the %d channels of a group", p.block_d, dg)
  end
  -- fewer threads only when there are fewer tasks (b, g, channel block) than threads
  return C.threads_valid(p, dev, shape.B * shape.G * ((dg + p.block_d - 1) // p.block_d))
end

-- THE default of the CPU path (runtime/cpu/sscan_cpu_params.c asks for it). Tiles of
-- (steps x channels of a task) are read with the contiguous side long: short pieces of
-- far-apart rows cost a TLB and cache miss each. Channel-contiguous: blocks of up to 256
-- channels (1 KB pieces); sequence-contiguous: up to 64; halved while that leaves fewer
-- than 2 tasks per thread; then brought within valid(): the C path clamps block_d to the
-- channels of a group and segment to L, so halving a value that covers them twice over
-- runs the same.
local function default(shape, dev)
  local dg = shape.D // math.max(shape.G, 1)
  local bd = shape.seq_major and 64 or 256
  while bd > 16 and shape.B * shape.G * ((dg + bd - 1) // bd) < 2 * dev.sm_count do bd = bd // 2 end
  while bd > 16 and bd >= 2 * dg do bd = bd // 2 end
  local seg = default_segment(shape)
  if shape.bwd then
    while seg > SPACE.segment[1] and seg >= 2 * shape.L do seg = seg // 2 end
  end
  return { segment = seg, block_d = bd, threads = 0 }
end

return C.describe({
  name = "sscan_cpu",
  op = "sscan",
  space = SPACE,
  order = { "block_d", "segment", "threads" },
  valid = valid,
  default = default,
})
