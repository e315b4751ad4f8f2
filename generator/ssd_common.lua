-- ssd_common.lua -- arithmetic and constraints shared by the SSD kernel descriptions
-- (generator/kernels/ssd_fwd.lua, ssd_bwd.lua): tile counts, the smem row pitches of
-- the backward's traits block (templates/ssd_bwd.cu) and the validity
-- checks both kernels make, with the same messages.

local M = {}

function M.ceil_div(a, b) return (a + b - 1) // b end
function M.round_up(a, b) return M.ceil_div(a, b) * b end

-- Varlen (docs/varlen.md): shape.nseq > 0 sequences packed along T (B = 1); the kernels
-- read cu_seqlens on the device (CG_VARLEN). Chunks then start at every sequence start,
-- numbered by slots below ceil(T / chunk) + nseq (templates/ssd_common.cuh): nchunks is
-- that bound, so the grids and workspaces need no offsets.
function M.varlen(shape) return (shape.nseq or 0) > 0 end
function M.nchunks(p, shape) return M.ceil_div(shape.T, p.chunk) + (M.varlen(shape) and shape.nseq or 0) end
-- The state rows: the batch, or the sequences of a varlen call.
function M.rows(shape) return M.varlen(shape) and shape.nseq or shape.B end
function M.dv_tiles(p, shape) return M.ceil_div(shape.dv, p.block_dv) end

-- Row pitches in floats of the backward's smem tiles, as the traits block of ssd_bwd.cu
-- derives them (bank-conflict padding there, plus a swizzle of the state, its gradient
-- and the scores' gradient): q, k, dq, dk +8, v, dout +8, the state and its gradient +8,
-- the scores and their gradient +8. (ssd_fwd.lua has its own.)
function M.pitches(p, shape)
  local dkp = M.round_up(shape.dk, 16)
  return { dkp = dkp, ldq = dkp + 8, ldv = p.block_dv + 8, lds = p.block_dv + 8, ldd = p.block_dv + 8,
           ldp = p.chunk + 8, lddp = p.chunk + 8 }
end

M.GRID_MAX = 2147483647

-- The shape and the tile sizes: true, or false and why.
function M.check_shape(p, shape)
  if shape.dk < 1 or shape.dv < 1 or shape.T < 1 or shape.B < 1 or shape.H < 1 or shape.G < 1 then
    return false, "empty shape"
  end
  if shape.H % shape.G ~= 0 then return false, "G must divide H" end
  if M.varlen(shape) and shape.B ~= 1 then return false, "cu_seqlens: B must be 1" end
  if p.chunk % 16 ~= 0 then return false, "chunk must be a multiple of 16" end
  if p.block_dv % 16 ~= 0 then return false, "block_dv must be a multiple of 16" end
  return true
end

-- The precision against the device, and a dv tile no wider than it needs to be.
function M.check_precision_tile(p, shape, dev)
  if p.precision ~= "ieee" and dev.arch < 80 then
    return false, string.format("precision %s needs tf32 mma (sm_80+), device is sm_%d", p.precision, dev.arch)
  end
  -- A tile twice as wide as dv only multiplies zeros: half of it covers dv already.
  if p.block_dv > 16 and p.block_dv >= 2 * shape.dv then
    return false, string.format("block_dv %d: half of it covers dv = %d", p.block_dv, shape.dv)
  end
  return true
end

-- precision=mma16 (docs/dtypes.md, templates/ssd_mma16.cuh): the products of two staged
-- 16-bit inputs by mma m16n8k16 (fp32 accumulate), the other products 3xtf32. `inputs`
-- names those products' operands (forward q, k). mma16 is valid exactly when every one
-- of them is 16-bit; and then, on sm_80+, it is the only precision: the inputs are exact
-- in tf32 and fp32, so ieee and 3xtf32 compute the same products less fast, and tf32
-- would round the fp32-computed operands (P, S, ...) too coarsely for fp16's target.
-- (Below sm_80 the 16-bit call keeps ieee; check_precision_tile refuses the mma precisions.)
function M.check_precision_mma16(p, shape, dev, inputs)
  local dts, all = shape.dtypes or "", true -- "name=dtype" words of the 16-bit tensors (core.lua)
  for _, t in ipairs(inputs) do
    if not dts:find("%f[%w_]" .. t .. "=") then all = false end
  end
  local names = table.concat(inputs, ", ")
  if p.precision == "mma16" and not all then
    return false, string.format("precision mma16 needs 16-bit %s (bf16 or f16)", names)
  end
  if p.precision ~= "mma16" and all and dev.arch >= 80 then
    return false, string.format("precision %s: with 16-bit %s the precision is mma16 (docs/dtypes.md)",
      p.precision, names)
  end
  return true
end

-- Every warp should own at least one of the largest matmul's `tiles` 16x16 tiles.
function M.check_warps(p, tiles)
  if p.warps > 2 and p.warps > tiles then
    return false, string.format("%d warps for %d output tiles", p.warps, tiles)
  end
  return true
end

-- What one block needs of the SM: smem bytes, and regs_per_thread for each of its threads.
function M.check_block(p, dev, smem, regs_per_thread)
  local threads = 32 * p.warps
  if smem > dev.smem_per_block then
    return false, string.format("needs %d bytes of shared memory, device allows %d", smem, dev.smem_per_block)
  end
  if threads * regs_per_thread > dev.regs_per_block then
    return false, string.format("%d threads x %d registers exceed the %d registers of a block", threads,
      regs_per_thread, dev.regs_per_block)
  end
  return true
end

-- Shrink the default p until valid(p, shape, dev) accepts it (at most 16 steps): the
-- stages (a kernel that has them), then the chunk, then the dv tile, then the warps.
-- Returns p as far as it got.
function M.shrink(p, shape, dev, valid)
  for _ = 1, 16 do
    if valid(p, shape, dev) then return p end
    if p.stages and p.stages > 1 then p.stages = 1
    elseif p.chunk > 16 then p.chunk = p.chunk // 2
    elseif p.block_dv > 16 then p.block_dv = p.block_dv // 2
    elseif p.warps > 2 then p.warps = p.warps // 2
    else break end
  end
  return p
end

-- The ordered arguments of an SSD kernel (the members of cg_ssd_fwd_params and
-- cg_ssd_bwd_params, templates/cg_kernel_params.h): the op's tensors by their op-table
-- names, the workspace (one region "ws"), the shape, the chunk count; varlen: the
-- offsets and nseq (CG_VARLEN_ARGS).
function M.args(tensors, p, shape)
  local a = {}
  for _, t in ipairs(tensors) do a[#a + 1] = { tensor = t } end
  a[#a + 1] = { ws = "ws" }
  for _, s in ipairs({ "B", "T", "G", "H", "dk", "dv" }) do a[#a + 1] = { sym = s } end
  a[#a + 1] = { int = M.nchunks(p, shape) }
  if M.varlen(shape) then
    a[#a + 1] = { cu = "cu_seqlens" }
    a[#a + 1] = { int = shape.nseq }
  end
  return a
end

-- The defines of a varlen shape (added to a kernel's own).
function M.varlen_defines(shape, defs)
  if M.varlen(shape) then defs.CG_VARLEN = 1 end
  return defs
end

return M
