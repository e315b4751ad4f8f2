"""What the device check's GPU scripts share (gpu_peers.py, gpu_gdn.py, gpu_decode.py):
importing a peer's module without its package's __init__, the rows' JSON written after
every row (a phase cut off at its limit keeps what it measured), the device block, and a
call's timing (CUDA events with the L2 flushed before each sample, torch_peers.measure_cold;
on the CPU, for the rehearsal, the wall clock)."""
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
import types



def skip(why):
    """Exit 77 (the device check's "skipped") with why in the --detail file, if given."""
    if "--detail" in sys.argv[:-1]:
        with open(sys.argv[sys.argv.index("--detail") + 1], "w") as f:
            f.write(why)
    print(why)
    sys.exit(77)


try:
    import torch
except ImportError as e:
    skip("torch not importable by %s: %s" % (sys.executable, e))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peers as tp  # noqa: E402


def need_chunkgen():
    """(chunkgen, chunkgen.torch), or skipped when the package is not there."""
    try:
        import chunkgen
        import chunkgen.torch as cgt
    except ImportError as e:
        skip("chunkgen not importable by %s: %s" % (sys.executable, e))
    return chunkgen, cgt


def import_skipping_init(pkg, module):
    """pkg.module; when pkg's __init__ fails (mamba_ssm's imports its compiled CUDA
    extension, which the Triton kernels do not need), pkg is registered without running its
    __init__ and the module is imported alone."""
    try:
        return importlib.import_module(pkg + "." + module)
    except Exception:
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise
        for k in [k for k in sys.modules if k == pkg or k.startswith(pkg + ".")]:
            del sys.modules[k]
        m = types.ModuleType(pkg)
        m.__path__ = list(spec.submodule_search_locations)
        sys.modules[pkg] = m
        return importlib.import_module(pkg + "." + module)


def why_not(e):
    """A row's reason from an exception: its type and first line."""
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def device_block(dev):
    """The JSON's device block: the GPU (or the CPU of a rehearsal) and the Python side."""
    d = {"backend": dev.type, "torch": torch.__version__, "python": platform.python_version()}
    for m in ("triton", "fla", "mamba_ssm", "chunkgen"):
        mod = sys.modules.get(m)
        if mod is None and m == "triton" and importlib.util.find_spec("triton"):
            mod = importlib.import_module("triton")
        d[m + "_version"] = getattr(mod, "__version__", None) if mod else None
        d[m + "_file"] = getattr(mod, "__file__", None) if mod else None  # which copy ran
    if dev.type == "cuda":
        p = torch.cuda.get_device_properties(dev)
        d.update(gpu=p.name, device_kind=p.name, sms=p.multi_processor_count, gpu_memory_gb=p.total_memory / 2**30,
                 l2_bytes=getattr(p, "L2_cache_size", None), torch_cuda=torch.version.cuda)
    else:
        d.update(device_kind="cpu", cpu=platform.processor() or platform.machine(), cores=os.cpu_count(),
                 rehearsal="no GPU: the phase's code on the CPU at small sizes; no GPU number in it")
    return d


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def first_call(call, dev):
    """(the call's result, its wall seconds: compile, autotune and load included)."""
    t0 = time.perf_counter()
    res = call()
    sync(dev)
    return res, time.perf_counter() - t0


def timed(call, dev, repeats=5, min_time=0.3, max_call_s=5.0):
    """A warm call's time: on a GPU one call per sample between CUDA events, the L2 flushed
    before each (torch_peers.measure_cold, as `chunkgen bench` times its cuda rows); on the
    CPU the wall clock. median_ms, q1_ms, q3_ms, samples, timer."""
    if dev.type == "cuda":
        m = tp.measure_cold(call, repeats, min_time, 2, max_call_s)
        m.pop("compile_s", None)
        return m
    call()
    v, start = [], time.perf_counter()
    while len(v) < 200 and (len(v) < repeats or time.perf_counter() - start < min_time):
        t0 = time.perf_counter()
        call()
        v.append(1e3 * (time.perf_counter() - t0))
        if v[-1] * 1e-3 > max_call_s:
            break
    v.sort()
    q = lambda f: v[min(len(v) - 1, int(f * len(v)))]  # noqa: E731
    return {"samples": len(v), "median_ms": q(0.5), "q1_ms": q(0.25), "q3_ms": q(0.75), "timer": "wall clock"}


class Doc:
    """The seeds' schema ({device, config, results}), rewritten after every row."""

    def __init__(self, path, device, config):
        self.path, self.doc = path, {"device": device, "config": config, "results": []}

    def add(self, row):
        self.doc["results"].append(row)
        return row

    def flush(self):
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.doc, f, indent=1)
        os.replace(self.path + ".tmp", self.path)
