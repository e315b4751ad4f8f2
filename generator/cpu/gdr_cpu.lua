-- gdr_cpu.lua -- the parameter space of the gated delta rule's chunked CPU path
-- (runtime/cpu/gdr_cpu_chunk*.c), for the autotuner. Same convention as
-- generator/cpu/ssd_cpu.lua (see generator/core.lua) with backend = "cpu": no template and
-- no launch, the CPU path is C code configured at run time through the config keys chunk
-- and threads. The generator core enumerates it (cg__gen_space) and resolves its default
-- (cg__gen_resolve); cg__gen_plan refuses it. shape.bwd is true when tuning the backward;
-- dev.sm_count is the CPU thread count, dev.isa the CPU path's ISA variant.
--
-- default() is THE default of the CPU path: cg__gdr_chunk_resolve (runtime/cpu/gdr_cpu_chunk.c)
-- asks for it through cg__cpu_space_default (cached per shape).
--
-- This space is what the tuner tries; cg__gdr_chunk_resolve is the guard for user pins and
-- accepts a superset (chunk in [1, 256], threads in [0, 4096]).

local C = require("cpu_common")

local SPACE = {
  -- tokens per chunk: the per-chunk solve and the intra-chunk products grow with it
  -- (about chunk * (dk + dv) flops per token), the state passes shrink (4 dk dv per chunk
  -- per token / chunk); fla's chunks are 16 / 32 / 64
  chunk = { 32, 64, 128 },
  threads = { 0, 1, 2, 4, 8, 16, 32, 64, 128 }, -- 0: all of the context's threads
}

-- 64 as in fla and the SSD path (docs/gdr.md: 67-80% of the measured FMA peak forward at
-- d = 128 on one thread); the chunk of the space up to it that covers T.
local CHUNK = 64

local function valid(p, shape, dev)
  local ok, why = C.chunked_valid(p, SPACE, shape)
  if not ok then return false, why end
  -- fewer threads only when there are fewer tasks than threads (a task is a (b, q/k
  -- group), or a (b, value head) when there are fewer groups than threads)
  return C.threads_valid(p, dev, shape.B * shape.H)
end

local function default(shape, dev)
  return { chunk = C.fit(SPACE.chunk, CHUNK, shape.T), threads = 0 }
end

return C.describe({
  name = "gdr_cpu",
  op = "gdr",
  space = SPACE,
  order = { "chunk", "threads" },
  valid = valid,
  default = default,
})
