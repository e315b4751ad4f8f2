"""The SSD custom calls' partitioning rule (jax.experimental.custom_partitioning), so that
chunkgen.jax.ssd under plain jax.jit on inputs sharded over batch and/or groups runs one
call per device on its own shard, with no all-gather.

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


def partitioned(op: str, names, want, flag: int, fn):
    """fn (the custom call on arrays `names`, returning `want`) with the SSD partitioning
    rule; fn itself for the selective scan."""
    if not op.startswith("ssd"):
        return fn
    token = not flag
    letters = [_letters(op, n, token) for n in tuple(names) + tuple(want)]
    f = custom_partitioning(fn)

    def rule(mesh, operand_types, result_types):
        qs, vs = _shape(operand_types[0]), _shape(operand_types[names.index("v")])
        G, H = qs[2 if token else 1], vs[2 if token else 1]
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
        # b and g from q's sharding; everything else whole on each device
        qspec = tuple(arg_shapes[0].sharding.spec) + (None,) * 4
        axis = {"b": qspec[0], "g": qspec[2 if token else 1]}
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
