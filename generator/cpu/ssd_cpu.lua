-- ssd_cpu.lua -- the parameter space of the SSD CPU path (runtime/cpu/ssd_cpu*.c), for
-- the autotuner. Same convention as generator/kernels/*.lua (see generator/core.lua)
-- with backend = "cpu": no template and no launch, the CPU path is C code configured at
-- run time through the config keys chunk, block_dv, heads and threads. The generator core
-- enumerates it (cg__gen_space) and resolves its default (cg__gen_resolve); cg__gen_plan
-- refuses it. shape.bwd is true when tuning the backward; dev.sm_count is the CPU
-- thread count, dev.isa the CPU path's ISA variant (runtime/cpu/cpu_isa.h).
--
-- default() is THE default of the CPU path: cg__ssd_cpu_params_default
-- (runtime/cpu/ssd_cpu.c) asks for it through cg__gen_resolve (cached per shape).
--
-- This space is what the tuner tries; cg__ssd_cpu_resolve (runtime/cpu/ssd_cpu.c) is
-- the guard for user pins and accepts a superset (chunk in [1, 1024], block_dv >= 1,
-- threads in [0, 4096], plus bwd_split in {0, 1}, which is not tuned here: the
-- backward picks it from the task count).

local C = require("cpu_common")

local SPACE = {
  chunk = { 16, 32, 48, 64, 96, 128 },         -- tokens per chunk
  block_dv = { 16, 32, 64, 128, 256 },          -- dv columns of the state tile per task (forward)
  threads = { 0, 1, 2, 4, 8, 16, 32, 64, 128 }, -- 0: all of the context's threads
  -- forward tasks: "group" walks a (b, g, dv block) and takes the group's heads in turn
  -- (Q K^T once per group, q and k read once, all heads' states live); "each" walks one
  -- (b, h, dv block), with H / G times the tasks (runtime/cpu/ssd_cpu_fwd.c)
  heads = { "group", "each" },
}

-- The GEMM micro-tile of each ISA variant (runtime/cpu/ssd_cpu_gemm.c, MR x NVMAX*VW):
-- rows and columns of C held in registers.
local TILE = {
  avx512 = { mr = 6, nr = 64 },  -- 24 of 32 zmm
  avx2 = { mr = 6, nr = 16 },    -- 12 of 16 ymm
  baseline = { mr = 4, nr = 8 }, -- 8 of 16 xmm
}
local function tile_of(dev) return TILE[dev.isa] or TILE.baseline end

-- Default chunk per variant (measured, 1 thread, seq 2048, the seeds' shapes; see
-- docs/bench.md): long enough for the GEMMs to run near the FMA peak, short enough that
-- the intra-chunk work (about chunk * (dk + dv) flops per token) stays small next to
-- the state work (4 dk dv per token).
-- (No variant named -- a caller that does not say -- keeps the original 64.)
local CHUNK = { avx512 = 64, avx2 = 48, baseline = 32 }
-- With dk and dv both 128 or more the state work dominates and a longer chunk amortizes
-- the state passes better (AVX2 EPYC, 1 thread, seq 2048: chunk 64 against 48 measured
-- 23% faster forward on g2h8_d128 and g1h1_d128, 2-12% faster forward+backward).
local CHUNK_LARGE_D = { avx2 = 64 }

-- The narrowest dv tile of the space that covers dv (the C default keeps the whole dv).
local function covering_block_dv(dv)
  for _, w in ipairs(SPACE.block_dv) do
    if w >= dv then return w end
  end
  return SPACE.block_dv[#SPACE.block_dv]
end

local function valid(p, shape, dev)
  local ok, why = C.chunked_valid(p, SPACE, shape)
  if not ok then return false, why end
  if shape.bwd then
    -- The backward keeps whole dk x dv tiles per (b, h): block_dv does not reach it.
    if p.block_dv ~= covering_block_dv(shape.dv) then return false, "block_dv does not affect the backward" end
    if p.heads ~= "each" then return false, "heads does not affect the backward" end
  elseif p.block_dv > 16 and p.block_dv >= 2 * shape.dv then
    return false, string.format("block_dv %d: half of it covers dv = %d", p.block_dv, shape.dv)
  elseif p.block_dv < tile_of(dev).nr and p.block_dv < shape.dv then
    -- narrower than the micro-tile: the GEMMs would run a fraction of its columns
    return false, string.format("block_dv %d: narrower than the %s tile's %d columns", p.block_dv,
      dev.isa or "baseline", tile_of(dev).nr)
  end
  if p.heads == "group" and shape.H == shape.G then
    return false, "heads=group: one head per group, the same as heads=each"
  end
  -- fewer threads only when there are fewer tasks than threads (each task is one (b, h)
  -- or (b, h, dv tile) walk)
  local tasks = shape.B * shape.H
  if not shape.bwd then
    tasks = tasks * ((shape.dv + p.block_dv - 1) // p.block_dv)
    if p.heads == "group" then tasks = tasks // (shape.H // shape.G) end
  end
  return C.threads_valid(p, dev, tasks)
end

-- The forward's task: a whole group of heads while the (b, g, dv block) tasks keep every
-- thread busy and the heads' [S; V] tiles (dk + chunk rows of the padded block, float32)
-- take at most 8 MB: Q K^T is then computed once per group instead of per head, and q and
-- k are read once. (Measured on the AVX2 EPYC, 1 thread: g2h8_d128 forward 90-110 ms
-- against 129-158 per head, g1h24_dk128_dv64 75-98 against 94-147, although 4 and 24
-- states of 110 and 56 KB exceed its 512 KB L2.) The backward has no such choice.
local function group_heads(shape, dev, chunk, bdv)
  local hpg = shape.H // shape.G
  if shape.bwd or hpg < 2 then return "each" end
  local w = math.min(bdv, shape.dv)
  local rbytes = (shape.dk + chunk) * ((w + 15) // 16 * 16) * 4
  local nblk = (shape.dv + w - 1) // w
  if hpg * rbytes <= 8 * 1024 * 1024 and shape.B * shape.G * nblk >= dev.sm_count then return "group" end
  return "each"
end

-- The variant's chunk; the whole dv in one task (splitting dv repeats Q K^T per block),
-- except in the forward when there are fewer (b, h) tasks than threads: then dv is
-- split (at least 32 columns, and the tile's width, a block); all threads.
local function default(shape, dev)
  local want = CHUNK[dev.isa] or 64
  if shape.dk >= 128 and shape.dv >= 128 and CHUNK_LARGE_D[dev.isa] then want = CHUNK_LARGE_D[dev.isa] end
  local chunk = C.fit(SPACE.chunk, want, shape.T) -- the largest that valid() keeps
  local bdv = shape.dv
  local tasks = shape.B * shape.H
  if not shape.bwd and tasks < dev.sm_count then
    local want = (dev.sm_count + tasks - 1) // tasks
    bdv = (shape.dv + want - 1) // want
    bdv = math.max(bdv, 32, tile_of(dev).nr)
  end
  bdv = covering_block_dv(math.min(bdv, shape.dv))
  return { chunk = chunk, block_dv = bdv, heads = group_heads(shape, dev, chunk, bdv), threads = 0 }
end

return C.describe({
  name = "ssd_cpu",
  op = "ssd",
  space = SPACE,
  order = { "chunk", "block_dv", "heads", "threads" },
  valid = valid,
  default = default,
})
