-- sscan_step.lua -- the selective-scan decode step (templates/sscan_step.cu, issue #36;
-- mamba's selective_state_update): one thread per (batch entry, channel) keeps the
-- channel's state [N] in registers over the entry's L tokens, so the state is read from
-- the cache once and written once per destination (memory bound). Compile-time N; G, the
-- optional tensors and softplus are run-time values.

local function ceil_div(a, b) return (a + b - 1) // b end

local GRID_MAX = 2147483647

local function valid(p, shape, dev)
  -- a thread keeps its channel's state and A row (2 N floats) in registers
  if shape.N > 64 then return false, "N > 64: a thread keeps its channel's state in registers" end
  if (shape.nseq or 0) > 0 then return false, "no cu_seqlens" end
  local ctas = ceil_div(shape.D, p.block_d) * shape.B
  if ctas > GRID_MAX then return false, string.format("grid of %d CTAs too large", ctas) end
  return true
end

local function default(shape, dev)
  return { block_d = shape.D >= 128 and 128 or (shape.D >= 64 and 64 or 32) }
end

-- cg_sscan_step_params: the op table's tensors, then the symbols and the options.
local TENSORS = { "x", "delta", "A", "B", "C", "D", "z", "delta_bias", "cache", "state_indices", "dst_indices", "y" }

local function launch(p, shape, dev)
  local args = {}
  for _, t in ipairs(TENSORS) do args[#args + 1] = { tensor = t } end
  for _, s in ipairs({ "B", "L", "D", "N", "G", "S" }) do args[#args + 1] = { sym = s } end
  args[#args + 1] = { int = shape.softplus and 1 or 0 }
  return { { entry = "cg_sscan_step", grid = { ceil_div(shape.D, p.block_d) * shape.B, 1, 1 },
             block = { p.block_d, 1, 1 }, smem = 0 } }, {}, args
end

return {
  name = "sscan_step",
  template = "sscan_step.cu",
  op = "sscan_step",
  consts = { "N" },
  half = { "x", "delta", "B", "C", "z", "cache", "y" },
  space = { block_d = { 32, 64, 128, 256 } },
  order = { "block_d" },
  valid = valid,
  default = default,
  launch = launch,
}
