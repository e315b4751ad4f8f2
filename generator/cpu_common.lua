-- cpu_common.lua -- the rules the CPU descriptions (generator/cpu/*.lua) share: when fewer
-- threads than the context has are worth trying, and when a length parameter (a chunk, a
-- segment) is larger than the extent it splits needs.

local M = {}

-- Fewer threads than the context has pays off only when there are fewer tasks than
-- threads; then try serial and a quarter or more of the cores, not every count.
-- true, or false and why, for p.threads (0: all) on dev (dev.sm_count: the CPU threads)
-- for a call of `tasks` tasks.
function M.threads_valid(p, dev, tasks)
  local cores = dev.sm_count
  if p.threads == 0 then return true end
  if p.threads >= cores then return false, "threads >= the context's threads (0 means all)" end
  if p.threads ~= 1 and 4 * p.threads < cores then return false, "fewer than a quarter of the cores" end
  if tasks >= cores then return false, string.format("%d tasks keep all %d threads busy", tasks, cores) end
  return true
end

-- Whether value v of the space `values` splits an extent n as its half would (v is not
-- the space's smallest and v >= 2 n): the smaller value already covers it.
function M.halves(v, values, n) return v > values[1] and v >= 2 * n end

-- The largest value of `values` (ascending) up to `want` that does not halve n.
function M.fit(values, want, n)
  local best = values[1]
  for _, v in ipairs(values) do
    if v <= want and not M.halves(v, values, n) then best = v end
  end
  return best
end

-- The checks every chunked path over q, k [B, T, G, dk], v [B, T, H, dv] makes (ssd_cpu,
-- gdr_cpu): a shape with no empty extent, a chunk that does not halve T. true, or false
-- and why.
function M.chunked_valid(p, space, shape)
  if shape.dk < 1 or shape.dv < 1 or shape.T < 1 or shape.H < 1 or shape.G < 1 then
    return false, "empty shape"
  end
  -- A chunk of 2T or more runs as a chunk of T: the smaller value already covers it.
  if M.halves(p.chunk, space.chunk, shape.T) then
    return false, string.format("chunk %d: half of it covers T = %d", p.chunk, shape.T)
  end
  return true
end

-- A CPU description (generator/core.lua) from its own fields d (name, op, space, order,
-- valid, default): backend "cpu" (no template or launch: nothing to render), no consts,
-- threads abbreviated "t".
function M.describe(d)
  d.backend, d.consts, d.abbrev = "cpu", {}, { threads = "t" }
  return d
end

return M
