--[[ keys.lua -- what each config key means: the one place its documentation lives.
`chunkgen gen KERNEL --space` (and --list) prints, per key of a description's space, its
type (integer or word), its values, this text and the default for a shape.
A key means the same in every description that has it; "<name>.<key>" entries refine
one description's key (looked up first). A new key in any space needs a line here
(test gen_space_keys_documented checks it). ]]

return {
    chunk     = "tokens per chunk: the chunked scan's block length along T (L for the selective scan)",
    block_dk  = "dk rows of the state tile one CTA owns",
    block_dv  = "dv columns of the state tile one CTA (CPU: one task) owns",
    block_d   = "channels (of D) one CPU task owns",
    dim_block = "channels (of D) one CTA owns",
    warps     = "warps per CTA (32 threads each)",
    stages    = "chunks in flight per CTA: 2 overlaps the next chunk's loads with this one's math",
    precision = "matmul arithmetic: ieee (fp32 FMA), tf32 (tensor cores, ~1e-3), 3xtf32 (tensor cores, fp32-accurate), mma16 (16-bit q, k [, v, dout]: their products by bf16/f16 mma m16n8k16, the rest 3xtf32; the only one for such calls on sm_80+)",
    strategy  = "how the chunks are scanned",
    ["ssd_fwd.strategy"]   = "seq: one CTA walks every chunk of a (b, h, dv tile); 3phase: chunk states, a scan over them, outputs (more CTAs, a workspace)",
    ["sscan_fwd.strategy"] = "seq: the state carried chunk to chunk by one CTA; par: pieces of the sequence in parallel, then their carries",
    ["sscan_bwd.strategy"] = "seq: the state carried chunk to chunk by one CTA; par: pieces of the sequence in parallel, then their carries",
    segment   = "backward: time steps between checkpointed states (memory against recomputation)",
    heads     = "grouped dq/dk: loop (one CTA owns a group's heads) or split (one CTA per head, per-head buffers summed in a fixed order)",
    ["ssd_cpu.heads"] = "forward tasks: group (one task per (b, g, dv tile) takes the group's heads in turn: Q K^T once per group) or each (one task per head)",
    recompute = "chunks per stored chunk-boundary state in the backward (1: every boundary stored, nothing recomputed)",
    threads   = "CPU threads for the call (0: all of the context's threads)",
    cols      = "state columns per thread (j, j + block_dv, ...): a CTA covers block_dv x cols columns",
}
