-- gdr_step.lua -- the gated delta rule's decode step (templates/gdr_step.cu, issue #36;
-- MATH_GDN.md section 5.3): one CTA per (batch entry, value head, block of dv columns);
-- each thread owns `cols` columns j of the state [dk, dv] (j, j + block_dv, ...) in
-- registers for the entry's T tokens, so the state is read from the cache once and
-- written once per destination (memory bound). A column's update needs only its own
-- p_j = S[:, j]^T k, so the columns are independent. q and k of the token are staged in
-- shared memory (2 dk floats); their L2 norms (use_qk_l2norm) and scale fold into two
-- scalars per token.
--
-- Compile-time shape: dk and l2norm (CG_DK, CG_L2NORM). B, T, G, H, dv, S, the strides
-- and scale (the op's validated real argument) are run-time values of the params struct.

local function ceil_div(a, b) return (a + b - 1) // b end

local GRID_MAX = 2147483647

-- State floats a thread keeps in registers.
local function regs(p, shape) return shape.dk * p.cols end

local function valid(p, shape, dev)
  if shape.G < 1 or shape.H < 1 or shape.H % shape.G ~= 0 then
    return false, string.format("G = %d does not divide H = %d", shape.G, shape.H)
  end
  -- a thread keeps cols columns of the state (dk floats each) in registers, measured with
  -- ptxas (sm_80, sm_90, float32 and bf16; step_gdr_nvrtc_*_space and
  -- gen_nvrtc_all_configs check every config for spills): one column up to dk = 136 (249
  -- registers on sm_80; float32 reaches 254 of the 255 at dk = 144), two columns, which
  -- also keep two sets of sums, up to 2 x 64 (241; 254 at 2 x 66); with 256 threads at
  -- most 64 floats (ssd_step's limit, kept)
  local limit = p.cols == 1 and 136 or 128
  if regs(p, shape) > limit then
    return false, string.format("dk * cols = %d > %d: a thread keeps its columns of the state in registers",
      regs(p, shape), limit)
  end
  if p.block_dv > 128 and regs(p, shape) > 64 then
    return false, "block_dv 256 with dk * cols > 64 spills registers"
  end
  if (shape.nseq or 0) > 0 then return false, "no cu_seqlens" end
  if p.block_dv > (dev.max_threads_per_block or 1024) then return false, "block_dv above the block size limit" end
  -- a CTA whose columns but the last set already cover dv only idles threads: a narrower
  -- config of the space covers dv (block_dv 32 with one column always exists)
  if (p.block_dv > 32 or p.cols > 1) and p.block_dv * p.cols // 2 >= shape.dv then
    return false, string.format("block_dv %d x cols %d: half of it covers dv = %d", p.block_dv, p.cols, shape.dv)
  end
  if 8 * shape.dk > (dev.smem_per_block or 49152) then return false, "q and k do not fit in shared memory" end
  local ctas = ceil_div(shape.dv, p.block_dv * p.cols) * shape.H * shape.B
  if ctas > GRID_MAX then return false, string.format("grid of %d CTAs too large", ctas) end
  return true
end

-- The narrowest block covering dv (at most 128 threads), a column per thread.
local function default(shape, dev)
  for _, w in ipairs({ 32, 64, 128 }) do
    if shape.dv <= w then return { block_dv = w, cols = 1 } end
  end
  return { block_dv = 128, cols = 1 }
end

-- cg_gdr_step_params: the op table's tensors, the symbols, then scale (a double).
local ARGS = {}
for _, t in ipairs({ "q", "k", "v", "g", "beta", "cache", "state_indices", "dst_indices", "o" }) do
  ARGS[#ARGS + 1] = { tensor = t }
end
for _, s in ipairs({ "B", "T", "G", "H", "dk", "dv", "S" }) do ARGS[#ARGS + 1] = { sym = s } end
ARGS[#ARGS + 1] = { real = "scale" }

-- One launch: a CTA per (entry, value head, block_dv x cols columns); q and k staged.
local function launch(p, shape, dev)
  local ctas = ceil_div(shape.dv, p.block_dv * p.cols) * shape.H * shape.B
  return { { entry = "cg_gdr_step", grid = { ctas, 1, 1 }, block = { p.block_dv, 1, 1 }, smem = 8 * shape.dk } },
         {}, ARGS
end

return {
  -- the space: threads per CTA x columns per thread
  space = { block_dv = { 32, 64, 128, 256 }, cols = { 1, 2 } },
  order = { "block_dv", "cols" },
  abbrev = { cols = "c" },
  valid = valid,
  default = default,
  launch = launch,
  name = "gdr_step",
  op = "gdr_step",
  template = "gdr_step.cu",
  consts = { "dk", "l2norm" },
  -- tensors that may be bf16 / f16 (CG_T_<NAME>; g is float32 in the op table): widened
  -- as read, the state float32 in registers, rounded once per store
  half = { "q", "k", "v", "beta", "cache", "o" },
}
