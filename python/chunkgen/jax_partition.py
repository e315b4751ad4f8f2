"""The custom calls' partitioning rule (jax.experimental.custom_partitioning), so that
chunkgen.jax.ssd and chunkgen.jax.gdr under plain jax.jit on inputs sharded over batch
and/or groups run one call per device on its own shard, with no all-gather. Which ops get
it, and each tensor's letters, come from the op table (has_rule: every tensor [B, ...] over
B, T, G, H, dk, dv); the gated delta rule's g and beta are b (g r) t like log_alpha.

The rule (Shardy's einsum-like notation), head-major shown, h = (g r) with r = H / G:
  q, k, dq, dk            b g t k
  v, o, dout, dv          b (g r) t v
  log_alpha, dlog_alpha   b (g r) t
  h0, hT, dhT, dh0        b (g r) k v
(h = g when G = H, h = r when G = 1). Only b and g may be sharded: t, k, v and r need
replication (a device holds whole sequences and whole groups, so the grouped q/k
gradients are complete on each device).
Token-major swaps the second and third letters of the sequence tensors. Inputs sharded
another way are resharded by XLA to fit (that may gather; shard over batch or groups).
The selective scan has no rule (its parameter gradients sum over the batch): use
chunkgen.jax.shard_sscan.
"""
from __future__ import annotations

from jax.experimental.custom_partitioning import custom_partitioning
from jax.sharding import NamedSharding, PartitionSpec

from ._ops import OPS

# The op table's extent symbols as the rule's factor letters.
_LETTER = {"B": "b", "T": "t", "G": "g", "H": "h", "dk": "k", "dv": "v"}


def _letters(op: str, name: str, token: bool):
    """Factor letters of tensor `name` of `op`, from the op table (extents in token-major
    order; `layout` tensors swap dimensions 1 and 2 in head-major)."""
    info = OPS[op]
    f = [_LETTER[e] for e in info.extents[name] if e]
    if info.layout[name] and not token:
        f[1], f[2] = f[2], f[1]
    return f


def _shape(t):
    from jax._src.interpreters import mlir  # the rule callback gets MLIR types

    return list(mlir.ir.RankedTensorType(t).shape)


def has_rule(op: str, names=None, want=None) -> bool:
    """Whether calls of op get the rule, from the op table alone: every tensor (of the call:
    names, want) starts with the batch B and has only the extents B, T, G, H, dk, dv (SSD and
    the gated delta rule; not the selective scan, whose A, D have no B)."""
    info = OPS[op]
    ts = tuple(names or info.inputs) + tuple(want or info.outputs)
    ext = [tuple(x for x in info.extents[n] if x) for n in ts if n in info.extents]
    return len(ext) == len(ts) and all(e[0] == "B" and all(x in _LETTER for x in e) for e in ext) and \
        any("G" in e for e in ext) and any("H" in e for e in ext)


def partitioned(op: str, names, want, flag: int, fn):
    """fn (the custom call on arrays `names`, returning `want`) with the partitioning rule
    when the op has one (has_rule); fn itself otherwise. flag bit 0: head-major."""
    if not has_rule(op, names, want):
        return fn
    token = not (flag & 1)
    letters = [_letters(op, n, token) for n in tuple(names) + tuple(want)]
    # an operand that carries G and one that carries H, and where (the op table's extents)
    g_at = next((i, ls.index("g")) for i, ls in enumerate(letters[:len(names)]) if "g" in ls)
    h_at = next((i, ls.index("h")) for i, ls in enumerate(letters[:len(names)]) if "h" in ls)
    f = custom_partitioning(fn)

    def rule(mesh, operand_types, result_types):
        G = _shape(operand_types[g_at[0]])[g_at[1]]
        H = _shape(operand_types[h_at[0]])[h_at[1]]
        # (a compound factor cannot hold a factor of size 1)
        h = "g" if H == G else ("r" if G == 1 else "(g r)")

        def spec(ls):
            return " ".join(h if x == "h" else x for x in ls)

        text = ", ".join(spec(ls) for ls in letters[:len(names)]) + " -> " + \
            ", ".join(spec(ls) for ls in letters[len(names):])
        sizes = {"r": H // G} if h == "(g r)" else {}
        # (Shardy wants them in the order the factors first appear)
        seen = [x for x in text.translate(str.maketrans("(),->", "     ")).split()]
        need = tuple(sorted({"t", "k", "v", "r"} & set(seen), key=seen.index))
        return text, dict(sizes, need_replication_factors=need)

    def partition(mesh, arg_shapes, result_shape):
        # b and g from the sharding of the operand with G (q); everything else whole on each device
        qspec = tuple(arg_shapes[g_at[0]].sharding.spec) + (None,) * 4
        axis = {"b": qspec[letters[g_at[0]].index("b")], "g": qspec[g_at[1]]}
        axis["h"] = axis["g"]

        def sharding(ls):
            return NamedSharding(mesh, PartitionSpec(*(axis.get(x) for x in ls)))

        args = tuple(sharding(ls) for ls in letters[:len(names)])
        outs = tuple(sharding(ls) for ls in letters[len(names):])
        return mesh, fn, outs, args

    def infer(mesh, arg_shapes, result_shape):
        return partition(mesh, arg_shapes, result_shape)[2]

    f.def_partition(partition=partition, infer_sharding_from_operands=infer, sharding_rule=rule)
    return f
