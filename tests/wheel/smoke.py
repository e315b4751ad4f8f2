"""smoke.py -- the installed wheel's smoke test (tests/wheel/run.sh runs it, with ref.py from
tests/python beside it, where no compiler, CMake, Lua, jansson, CUDA toolkit or checkout is
visible). Each op against the float64 loops of ref.py (forward and every gradient):
chunkgen.torch.ssd / sscan, chunkgen.jax.ssd / sscan, chunkgen.compat.mamba's
mamba_chunk_scan_combined once; the CPU path under each ISA variant this CPU has
(CHUNKGEN_CPU_ISA, one process each); the packaged CLI rendering a kernel (the embedded Lua
generator and templates). Exit status 0 only if every check passed."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from ref import TOL_BWD, TOL_FWD, rel_err, ssd_ref, sscan_ref

failures = []


def check(name, got, want, tol):
    e = rel_err(*(x if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x)) for x in (got, want)))
    ok = e <= tol
    print(f"  {'ok  ' if ok else 'FAIL'} {name}: rel err {e:.2e} (tol {tol:g})")
    if not ok:
        failures.append(name)


import chunkgen  # noqa: E402  (after ref: the wheel's package, not a checkout's)

venv = os.path.realpath(sys.prefix)
where = os.path.realpath(chunkgen.__file__)
print(f"chunkgen {chunkgen.__version__ if hasattr(chunkgen, '__version__') else ''} from {where}")
if not where.startswith(venv + os.sep):
    sys.exit(f"smoke.py: chunkgen imported from {where}, not from the wheel's environment {venv}")

g = torch.Generator().manual_seed(38)


def rnd(*shape, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale)


# ------------------------------------------------------------------ inputs (odd shapes)
B, T, G, H, dk, dv = 2, 7, 1, 2, 5, 3
ssd_in = dict(q=rnd(B, T, G, dk), k=rnd(B, T, G, dk), v=rnd(B, T, H, dv),
              log_alpha=-torch.rand(B, T, H, generator=g, dtype=torch.float64), h0=rnd(B, H, dk, dv))
ssd_w = (rnd(B, T, H, dv), rnd(B, H, dk, dv))  # the loss's weights: sum(o w_o) + sum(hT w_h)
Bs, L, D, N = 2, 6, 3, 4
sscan_in = dict(x=rnd(Bs, L, D), delta=rnd(Bs, L, D, scale=0.5), A=-torch.rand(D, N, generator=g, dtype=torch.float64),
                B=rnd(Bs, L, N), C=rnd(Bs, L, N), D=rnd(D), z=rnd(Bs, L, D), delta_bias=rnd(D, scale=0.1),
                h0=rnd(Bs, D, N))
sscan_w = (rnd(Bs, L, D), rnd(Bs, D, N))


def ref_grads(fn, ins, w, **kw):
    leaves = {n: t.clone().requires_grad_() for n, t in ins.items()}
    out, hT = fn(**leaves, **kw)
    ((out * w[0]).sum() + (hT * w[1]).sum()).backward()
    return out.detach(), hT.detach(), {n: t.grad for n, t in leaves.items()}


def check_op(label, ins, got, want):
    out, hT, grads = got
    rout, rhT, rgrads = want
    check(f"{label} out", out, rout, TOL_FWD)
    check(f"{label} hT", hT, rhT, TOL_FWD)
    for n in ins:
        check(f"{label} d{n}", grads[n], rgrads[n], TOL_BWD)


ssd_want = ref_grads(ssd_ref, ssd_in, ssd_w)
sscan_want = ref_grads(sscan_ref, sscan_in, sscan_w, delta_softplus=True)

# ------------------------------------------------------------------ PyTorch
import chunkgen.torch as ct  # noqa: E402

print("chunkgen.torch (float32, CPU):")
for label, fn, ins, w, want, kw in (("ssd", ct.ssd, ssd_in, ssd_w, ssd_want, {}),
                                   ("sscan", ct.sscan, sscan_in, sscan_w, sscan_want, {"delta_softplus": True})):
    leaves = {n: t.float().requires_grad_() for n, t in ins.items()}
    out, hT = fn(*leaves.values(), **kw)
    ((out * w[0].float()).sum() + (hT * w[1].float()).sum()).backward()
    check_op(f"torch.{label}", ins, (out.detach(), hT.detach(), {n: t.grad for n, t in leaves.items()}), want)

# ------------------------------------------------------------------ JAX
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import chunkgen.jax as cj  # noqa: E402

print("chunkgen.jax (float32, CPU):")
for label, fn, ins, w, want, kw in (("ssd", cj.ssd, ssd_in, ssd_w, ssd_want, {"layout": "token"}),
                                   ("sscan", cj.sscan, sscan_in, sscan_w, sscan_want, {"delta_softplus": True})):
    args = [jnp.asarray(t.numpy(), jnp.float32) for t in ins.values()]
    wo, wh = (jnp.asarray(t.numpy(), jnp.float32) for t in w)
    (out, hT), vjp = jax.vjp(lambda *a: fn(*a, **kw), *args)
    grads = vjp((wo, wh))
    check_op(f"jax.{label}", ins, (np.asarray(out), np.asarray(hT),
                                   {n: np.asarray(d) for n, d in zip(ins, grads)}), want)

# ------------------------------------------------------------------ compat.mamba, once
from chunkgen.compat.mamba import mamba_chunk_scan_combined  # noqa: E402

print("chunkgen.compat.mamba.mamba_chunk_scan_combined:")
b, l, h, p, gg, n = 2, 9, 2, 3, 1, 4
m = dict(x=rnd(b, l, h, p), dt=torch.rand(b, l, h, generator=g, dtype=torch.float64) * 0.5,
         A=-torch.rand(h, generator=g, dtype=torch.float64), B=rnd(b, l, gg, n), C=rnd(b, l, gg, n), D=rnd(h))
wy = rnd(b, l, h, p)


def mamba_ref(x, dt, A, B, C, D):
    o, _ = ssd_ref(C, B, dt[..., None] * x, dt * A)
    return o + D[:, None] * x


leaves64 = {k_: t.clone().requires_grad_() for k_, t in m.items()}
(mamba_ref(**leaves64) * wy).sum().backward()
leaves32 = {k_: t.float().requires_grad_() for k_, t in m.items()}
y = mamba_chunk_scan_combined(leaves32["x"], leaves32["dt"], leaves32["A"], leaves32["B"], leaves32["C"],
                              chunk_size=4, D=leaves32["D"])
(y * wy.float()).sum().backward()
check("compat.mamba y", y.detach(), mamba_ref(**m), TOL_FWD)
for k_ in m:
    check(f"compat.mamba d{k_}", leaves32[k_].grad, leaves64[k_].grad, TOL_BWD)

# ------------------------------------------------------------------ each ISA variant
print("the CPU path's variants (one process each, chunkgen.ssd on numpy float32):")
cpu_flags = set()
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("flags"):
            cpu_flags = set(line.split(":", 1)[1].split())
            break
has = {"baseline": True, "avx2": {"avx2", "fma", "f16c"} <= cpu_flags,
       "avx512": {"avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl"} <= cpu_flags}
with tempfile.TemporaryDirectory() as d:
    np.savez(os.path.join(d, "ssd.npz"), **{n: t.numpy().astype(np.float32) for n, t in ssd_in.items()})
    child = ("import sys, numpy as np, chunkgen\nfrom chunkgen import _C\n"
             "a = np.load(sys.argv[1]); o, hT = chunkgen.ssd(a['q'], a['k'], a['v'], a['log_alpha'], a['h0'], "
             "layout='token', backend='cpu')\nnp.save(sys.argv[2], o); print(_C.cpu_isa())\n")
    for isa, present in has.items():
        out_path = os.path.join(d, f"o_{isa}.npy")
        r = subprocess.run([sys.executable, "-c", child, os.path.join(d, "ssd.npz"), out_path],
                           env=dict(os.environ, CHUNKGEN_CPU_ISA=isa), capture_output=True, text=True, timeout=300)
        ran = r.stdout.strip()
        if r.returncode != 0 or (present and ran != isa):
            print(f"  FAIL CHUNKGEN_CPU_ISA={isa}: ran {ran!r}, exit {r.returncode}\n{r.stderr}")
            failures.append(f"isa {isa}")
            continue
        if not present:
            print(f"  (this CPU has no {isa}: {ran} ran instead, as the library promises)")
        check(f"cpu[{ran}] ssd o", np.load(out_path), ssd_want[0], TOL_FWD)

# ------------------------------------------------------------------ the packaged CLI
print("the chunkgen CLI (the console script and chunkgen/bin/chunkgen):")
cli = os.path.join(os.path.dirname(sys.executable), "chunkgen")
r = subprocess.run([cli, "gen", "ssd_fwd", "--shape", "dk=48,dv=40"], capture_output=True, text=True, timeout=300)
ok = r.returncode == 0 and "__global__" in r.stdout
print(f"  {'ok  ' if ok else 'FAIL'} chunkgen gen ssd_fwd --shape dk=48,dv=40: exit {r.returncode}, "
      f"{len(r.stdout.splitlines())} lines of CUDA{'' if ok else chr(10) + r.stderr[-2000:]}")
if not ok:
    failures.append("cli gen")
r = subprocess.run([cli, "info"], capture_output=True, text=True, timeout=300)
nvrtc = [ln.strip() for ln in r.stdout.splitlines() if "nvrtc" in ln.lower()]
print(f"  {'ok  ' if r.returncode == 0 else 'FAIL'} chunkgen info: exit {r.returncode}; {' | '.join(nvrtc[:2])}")
if r.returncode != 0:
    failures.append("cli info")
    print(r.stderr[-2000:])

# NVRTC from the nvidia-cuda-nvrtc wheel (the toolkit is hidden): one kernel compiled, no GPU
import glob  # noqa: E402
import importlib.util  # noqa: E402

spec = importlib.util.find_spec("nvidia")
libs = sorted(f for d in (spec.submodule_search_locations if spec else []) for f in
              glob.glob(os.path.join(d, "cu*", "lib", "libnvrtc.so.*")) + glob.glob(os.path.join(d, "cuda_nvrtc", "lib", "libnvrtc.so.*"))
              if "builtins" not in f and "alt" not in f)
if libs:
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([cli, "build-kernels", "--shape", "sscan_fwd:B=1,L=64,D=16,N=4", "--arch", "80"],
                           env=dict(os.environ, CHUNKGEN_NVRTC=libs[-1], CHUNKGEN_CACHE_DIR=d),
                           capture_output=True, text=True, timeout=300)
        ok = r.returncode == 0 and " compiled " in r.stdout
        print(f"  {'ok  ' if ok else 'FAIL'} CHUNKGEN_NVRTC={libs[-1]} chunkgen build-kernels sscan_fwd --arch 80: "
              f"exit {r.returncode}{'' if ok else chr(10) + r.stdout[-1000:] + r.stderr[-2000:]}")
        if not ok:
            failures.append("nvrtc wheel")
else:
    print("  (no nvidia-cuda-nvrtc wheel in the test environment: NVRTC from it not tried)")

if failures:
    sys.exit(f"smoke.py: {len(failures)} checks failed: {', '.join(failures)}")
print("smoke.py: all checks passed")
