-- ssd_step.lua -- the SSD decode step (templates/ssd_step.cu, issue #36): one CTA per
-- (batch entry, head, block of dv columns); each thread owns one column j of the state
-- [dk, dv] in registers for the entry's T tokens, so the state is read from the cache
-- once and written once per destination (memory bound). q and k of the token are staged
-- in shared memory (2 dk floats).

local function ceil_div(a, b) return (a + b - 1) // b end

local GRID_MAX = 2147483647

local function valid(p, shape, dev)
  -- a thread keeps its column of the state (dk floats) in registers: no spills measured up
  -- to dk = 130 with block_dv <= 128 (sm_80, sm_90: gen_nvrtc_all_configs), a spill at
  -- dk = 130 with 256 threads
  if shape.dk > 136 then return false, "dk > 136: a thread keeps its column of the state in registers" end
  if p.block_dv > 128 and shape.dk > 64 then return false, "block_dv 256 with dk > 64 spills registers" end
  if (shape.nseq or 0) > 0 then return false, "no cu_seqlens" end
  if p.block_dv > (dev.max_threads_per_block or 1024) then return false, "block_dv above the block size limit" end
  local ctas = ceil_div(shape.dv, p.block_dv) * shape.H * shape.B
  if ctas > GRID_MAX then return false, string.format("grid of %d CTAs too large", ctas) end
  return true
end

-- The narrowest block covering dv (at most 128 threads): a column per thread.
local function default(shape, dev)
  for _, w in ipairs({ 32, 64, 128 }) do
    if shape.dv <= w then return { block_dv = w } end
  end
  return { block_dv = 128 }
end

-- cg_ssd_step_params: the op table's tensors, then the symbols.
local TENSORS = { "q", "k", "v", "log_alpha", "cache", "state_indices", "dst_indices", "o" }

local function launch(p, shape, dev)
  local args = {}
  for _, t in ipairs(TENSORS) do args[#args + 1] = { tensor = t } end
  for _, s in ipairs({ "B", "T", "G", "H", "dk", "dv", "S" }) do args[#args + 1] = { sym = s } end
  return { { entry = "cg_ssd_step", grid = { ceil_div(shape.dv, p.block_dv) * shape.H * shape.B, 1, 1 },
             block = { p.block_dv, 1, 1 }, smem = 8 * shape.dk } }, {}, args
end

return {
  name = "ssd_step",
  template = "ssd_step.cu",
  op = "ssd_step",
  -- tensors that may be bf16 / f16 (CG_T_<NAME>): widened as read, the state float32 in
  -- registers, rounded once per store
  half = { "q", "k", "v", "cache", "o" },
  space = { block_dv = { 32, 64, 128, 256 } },
  order = { "block_dv" },
  valid = valid,
  default = default,
  launch = launch,
}
