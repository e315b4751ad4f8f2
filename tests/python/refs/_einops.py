"""einops' rearrange and repeat, as far as the pinned upstream references use them (axis
names, parenthesised groups, "...", unit axes "1"; sizes given as keywords), on torch
tensors: so that mamba_ref.py and fla_ref.py run unchanged except their imports without
einops installed. Not einops: just enough of its pattern language for those files."""
from __future__ import annotations

import math
import re


def _side(s: str):
    """A side of a pattern as a list of groups; a group is a list of names ('...', '1',
    axis names)."""
    groups, cur = [], None
    for tok in re.findall(r"\(|\)|\.\.\.|[A-Za-z_][A-Za-z_0-9]*|\d+", s):
        if tok == "(":
            cur = []
        elif tok == ")":
            groups.append(cur)
            cur = None
        elif cur is not None:
            cur.append(tok)
        else:
            groups.append([tok])
    return groups


def _solve(groups, shape, sizes):
    """The size of every elementary axis of the left side (and the '...' extents)."""
    n_ell = len(shape) - (len(groups) - 1) if any(g == ["..."] for g in groups) else 0
    dims, ell, i = dict(sizes), (), 0
    for g in groups:
        if g == ["..."]:
            ell = tuple(shape[i:i + n_ell])
            i += n_ell
            continue
        known = math.prod(dims[a] for a in g if a in dims)
        unknown = [a for a in g if a not in dims and a != "1"]
        if len(unknown) > 1:
            raise ValueError(f"_einops: cannot infer {unknown} in {g}")
        if unknown:
            dims[unknown[0]] = shape[i] // known
        i += 1
    return dims, ell


def _apply(tensor, pattern: str, sizes: dict, allow_new: bool):
    left, right = (_side(s) for s in pattern.split("->"))
    dims, ell = _solve(left, tuple(tensor.shape), sizes)
    flat_left = [a for g in left for a in g if a != "1"]
    # elementary shape of the input (ellipsis expanded)
    elem = []
    for a in flat_left:
        elem.extend(ell if a == "..." else (dims[a],))
    t = tensor.reshape(elem)
    names = []
    for a in flat_left:
        names.extend([f"...{j}" for j in range(len(ell))] if a == "..." else [a])
    flat_right = [a for g in right for a in g if a != "1"]
    right_names = []
    for a in flat_right:
        right_names.extend([f"...{j}" for j in range(len(ell))] if a == "..." else [a])
    new = [a for a in right_names if a not in names]
    if new and not allow_new:
        raise ValueError(f"_einops: rearrange cannot create axes {new}")
    order = [names.index(a) for a in right_names if a in names]
    t = t.permute(order)
    for pos, a in enumerate(right_names):  # new (repeated) axes, then expanded
        if a not in names:
            t = t.unsqueeze(pos)
    full = [dims[a] if a in dims else ell[int(a[3:])] for a in right_names]
    t = t.expand(full)
    out = []
    for g in right:
        if g == ["..."]:
            out.extend(ell)
        else:
            out.append(math.prod(1 if a == "1" else dims[a] for a in g))
    return t.reshape(out)


def rearrange(tensor, pattern: str, **sizes):
    return _apply(tensor, pattern, sizes, allow_new=False)


def repeat(tensor, pattern: str, **sizes):
    return _apply(tensor, pattern, sizes, allow_new=True)
