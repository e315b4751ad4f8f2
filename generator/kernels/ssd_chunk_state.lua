-- ssd_chunk_state.lua -- phase 1 of the three-phase SSD forward (templates/ssd_chunk_state.cu):
-- per (b, h, chunk c) U_c = (K * w)^T V and gamma_c = exp(A_last), in FFMA.
-- Grid: x = (dk tiles * dv tiles) * chunks, y = H, z = B; one CTA per U tile.

local function cdiv(a, b) return (a + b - 1) // b end

local function smem_bytes(p)
    -- A and w [CHUNK] + K tile [CHUNK, BLOCK_DK] + V tile [CHUNK, BLOCK_DV], fp32
    return 4 * (2 * p.chunk + p.chunk * (p.block_dk + p.block_dv))
end

-- Thread layout of the traits block: TJ threads along dv, TI along dk; each thread
-- accumulates an RM x RN micro-tile.
local function layout(p)
    local nt = p.warps * 32
    local tj = math.min(p.block_dv, 32)
    local ti = nt // tj
    return nt, ti, tj, p.block_dk // math.max(ti, 1), p.block_dv // tj
end

local MAX_ACC = 64 -- accumulators per thread: keeps ptxas far from spilling

return {
    name = "ssd_chunk_state",
    op = "ssd_chunk_state",
    template = "ssd_chunk_state.cu",
    consts = { "dk", "dv" },
    space = {
        chunk = { 16, 32, 64, 128, 256 },
        block_dk = { 16, 32, 64, 128 },
        block_dv = { 32, 64 },
        warps = { 2, 4, 8 },
        precision = { "ieee" },
    },
    order = { "chunk", "block_dk", "block_dv", "warps", "precision" },

    valid = function(p, s, dev)
        if s.dk < 1 or s.dv < 1 or s.T < 1 or s.B < 1 or s.H < 1 or s.G < 1 then
            return false, "needs B, T, G, H, dk, dv >= 1"
        end
        if s.H % s.G ~= 0 then return false, string.format("G=%d does not divide H=%d", s.G, s.H) end
        local nt, ti, tj, rm, rn = layout(p)
        if ti > p.block_dk then
            return false, string.format("%d warps leave %d thread rows for block_dk=%d", p.warps, ti, p.block_dk)
        end
        if rm * rn > MAX_ACC then
            return false, string.format("%d accumulators per thread (max %d): more warps or smaller tiles",
                rm * rn, MAX_ACC)
        end
        -- registers: accumulators + operands + ~32 for addressing, per thread, per block
        local regs = rm * rn + rm + rn + 32
        if regs * nt > dev.regs_per_block then
            return false, string.format("about %d registers x %d threads exceed %d", regs, nt, dev.regs_per_block)
        end
        local smem = smem_bytes(p)
        if smem > dev.smem_per_block then
            return false, string.format("%d bytes of shared memory, the device allows %d", smem, dev.smem_per_block)
        end
        -- A tile twice as wide as the data only adds idle threads: leave it to the smaller one.
        if p.block_dk > 16 and p.block_dk >= 2 * s.dk then
            return false, string.format("block_dk=%d is at least twice dk=%d", p.block_dk, s.dk)
        end
        if p.block_dv > 32 and p.block_dv >= 2 * s.dv then
            return false, string.format("block_dv=%d is at least twice dv=%d", p.block_dv, s.dv)
        end
        local gx = cdiv(s.dk, p.block_dk) * cdiv(s.dv, p.block_dv) * cdiv(s.T, p.chunk)
        if gx > 2147483647 or s.H > 65535 or s.B > 65535 then
            return false, "grid too large (tiles*chunks < 2^31, H and B <= 65535)"
        end
        return true
    end,

    default = function(s, dev)
        local bk = 16
        while bk < s.dk and bk < 64 do bk = bk * 2 end
        return {
            chunk = 64,
            block_dk = bk,
            block_dv = s.dv > 32 and 64 or 32,
            warps = 4,
            precision = "ieee",
        }
    end,

    launch = function(p, s, dev)
        local nc = cdiv(s.T, p.chunk)
        local tiles = cdiv(s.dk, p.block_dk) * cdiv(s.dv, p.block_dv)
        -- workspace: U [B, H, NC, dk, dv] and gamma [B, H, NC], fp32
        local ws = 4 * s.B * s.H * nc * (s.dk * s.dv + 1)
        return {
            { entry = "ssd_chunk_state", grid = { tiles * nc, s.H, s.B }, block = { p.warps * 32, 1, 1 },
              smem = smem_bytes(p) },
        }, ws
    end,
}
