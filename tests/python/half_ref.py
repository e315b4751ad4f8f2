"""The 16-bit tests' accuracy rule (issue #15 item 5, docs/dtypes.md): measured against a
float64 computation on the rounded inputs (and the rounded cotangents), by ref.py's
relative error (max |a - ref| / max |ref|). A 16-bit output is within 1e-2 (bfloat16) or
2e-3 (float16), and no worse than twice the error of the float64 result rounded to that
dtype (what a float32 computation rounded once at the end gets, up to float32 error); a
float32 output (the states, the gradients of the float32-only tensors) within the float32
tolerances of ref.py."""
import numpy as np

from ref import TOL_BWD, TOL_FWD

# numpy dtype names (torch.bfloat16 -> "bfloat16"; jnp.bfloat16 is ml_dtypes' "bfloat16")
TOL16 = {"bfloat16": 1e-2, "float16": 2e-3}


def dtype_name(dt) -> str:
    return str(dt).replace("torch.", "")


def check_accuracy(name: str, got, ref, rounded_ref, rel_err, grad: bool):
    """got's error against ref (float64), in got's dtype's rule; rounded_ref: ref rounded
    to got's dtype (any array type rel_err takes). Returns the error."""
    err = rel_err(got, ref)
    tol = TOL16.get(dtype_name(got.dtype))
    if tol is None:
        assert err < (TOL_BWD if grad else TOL_FWD), (name, got.dtype, err)
        return err
    floor = rel_err(rounded_ref, ref)
    assert err <= tol, (name, got.dtype, err, tol)
    assert err <= 2 * floor + 1e-7, (name, got.dtype, err, "rounded float64:", floor)
    return err


def finite(a) -> bool:
    return bool(np.isfinite(np.asarray(a, np.float64)).all())
