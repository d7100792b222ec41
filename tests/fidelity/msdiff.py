"""The differential suite's contract: one case runs unchanged on real MindSpore and on minispore.

A case is a function of one argument, the framework's top-level module (`mindspore` or
`minispore`), written the way a MindSpore user writes code (`ms.Tensor`, `ms.ops.ReduceSum`,
`ms.nn.BatchNorm2d`, ...). It returns what should match: Tensors, NumPy arrays, Python scalars,
strings, None, and tuples / lists / dicts of them. Inputs come from NumPy with fixed seeds, so
both frameworks see the same numbers.

    from msdiff import case, sub

    @case("tensor/transpose_varargs")
    def _(ms):
        x = ms.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
        return x.transpose(2, 0, 1)

`tests/fixtures/mindspore/make_goldens.py` runs every case on the real MindSpore 2.10 wheel (in its
own venv: MindSpore needs numpy<2) and writes what came back to `goldens/<area>.npz`;
`test_differential.py` runs the same case on minispore and compares with `compare`. A case whose
behaviour is "raise" (bad input) is declared `raises=True`: MindSpore must raise, and minispore must
raise one of its own errors (op, expected, got, where), never a raw NumPy traceback.

Cases live in `cases/<area>.py`; the area is the file's stem and the first part of each id.
"""
from __future__ import annotations

import glob
import importlib
import importlib.util
import math
import os
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASE_DIR = os.path.join(HERE, "cases")
GOLDEN_DIR = os.path.join(HERE, "..", "fixtures", "mindspore", "goldens")


@dataclass
class Case:
    id: str
    fn: object
    rtol: float = 1e-5
    atol: float = 1e-6
    raises: bool = False
    note: str = ""
    tags: tuple = field(default_factory=tuple)

    @property
    def area(self):
        return self.id.split("/", 1)[0]


CASES: dict[str, Case] = {}


def case(case_id, *, rtol=1e-5, atol=1e-6, raises=False, note=""):
    """Register `fn(ms)` as the differential case `case_id` ("area/name", unique)."""
    def register(fn):
        if case_id in CASES:
            raise ValueError(f"duplicate differential case id {case_id!r}")
        CASES[case_id] = Case(case_id, fn, rtol=rtol, atol=atol, raises=raises, note=note)
        return fn
    return register


def load_cases(areas=None) -> dict[str, Case]:
    """Import cases/<area>.py for every area (or the given ones); returns {id: Case}."""
    for path in sorted(glob.glob(os.path.join(CASE_DIR, "*.py"))):
        area = os.path.splitext(os.path.basename(path))[0]
        if area.startswith("_") or (areas and area not in areas):
            continue
        mod_name = f"msdiff_cases_{area}"
        if mod_name in importlib.sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(mod_name, path)
        mod = importlib.util.module_from_spec(spec)
        importlib.sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return {k: c for k, c in CASES.items() if not areas or c.area in areas}


# -- helpers cases use -------------------------------------------------------------------------

def sub(ms, name):
    """A submodule of the framework: `sub(ms, "dataset.vision")` is `mindspore.dataset.vision`
    (MindSpore does not import every subpackage on `import mindspore`)."""
    return importlib.import_module(f"{ms.__name__}.{name}")


def rand(*shape, seed=0, dtype=np.float32, low=-1.0, high=1.0):
    """Deterministic uniform data, identical for both frameworks."""
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


def fill_params(ms, net, seed=0, scale=0.1):
    """Give every parameter deterministic values (in name order), so two frameworks' random
    initializers do not matter. Moving statistics named moving_variance are kept positive."""
    rng = np.random.default_rng(seed)
    for p in sorted(net.get_parameters(), key=lambda p: p.name):
        shape = tuple(p.shape)
        vals = rng.uniform(-scale, scale, size=shape)
        if "moving_variance" in p.name or p.name.endswith("gamma"):
            vals = 1.0 + np.abs(vals)
        p.set_data(ms.Tensor(vals.astype(np.float32)))
    return net


def dense_norm_dense(ms):
    """The small optimizer-test network, Dense(4, 3) -> LayerNorm((3,)) -> Dense(3, 2), with fixed
    weights: its `norm.gamma` / `norm.beta` exercise the optimizers' weight-decay filter. Shared by
    the optimizer cases (optim.py, nn_more.py) so both check updates on one network."""
    nn = ms.nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Dense(4, 3)
            self.norm = nn.LayerNorm((3,))
            self.fc2 = nn.Dense(3, 2)

        def construct(self, x):
            return self.fc2(self.norm(self.fc1(x)))

    return fill_params(ms, Net(), seed=1, scale=0.5)


def param_names(net):
    """The parameter names of a Cell, in definition order, with their shapes."""
    return [(p.name, tuple(p.shape)) for p in net.get_parameters()]


# -- what a case returned, as plain data ---------------------------------------------------------

_DTYPE_NAMES = {"Bool", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float16",
                "Float32", "Float64", "BFloat16", "Complex64", "Complex128"}


def _is_tensor(x):
    return hasattr(x, "asnumpy") and hasattr(x, "dtype") and hasattr(x, "shape")


def to_plain(out, arrays: dict, prefix: str):
    """Turn a case's result into JSON-able structure; arrays go into `arrays` under unique keys."""
    if _is_tensor(out):
        dtype = str(out.dtype)
        if dtype == "BFloat16":
            data = out.float().asnumpy()
        else:
            data = out.asnumpy()
        key = f"{prefix}#{len(arrays)}"
        arrays[key] = np.array(data)
        return {"kind": "tensor", "dtype": dtype, "shape": list(out.shape), "key": key}
    if isinstance(out, np.ndarray) or isinstance(out, np.generic):
        key = f"{prefix}#{len(arrays)}"
        arrays[key] = np.array(out)
        return {"kind": "ndarray", "dtype": str(np.asarray(out).dtype), "key": key}
    if out is None or isinstance(out, (bool, str)):
        return {"kind": "value", "value": out}
    if isinstance(out, int):
        return {"kind": "int", "value": int(out)}
    if isinstance(out, float):
        return {"kind": "float", "value": None if math.isnan(out) else out, "nan": math.isnan(out)}
    if isinstance(out, (tuple, list)):
        return {"kind": type(out).__name__ if type(out) in (tuple, list) else "tuple",
                "items": [to_plain(o, arrays, prefix) for o in out]}
    if isinstance(out, dict):
        return {"kind": "dict", "items": {str(k): to_plain(v, arrays, prefix) for k, v in out.items()}}
    if str(out) in _DTYPE_NAMES:           # a dtype object (mindspore.float32 / minispore.float32)
        return {"kind": "dtype", "value": str(out)}
    raise TypeError(f"a differential case returned {type(out).__name__}; return tensors, arrays, "
                    f"scalars, strings or containers of them")


def compare(expected, expected_arrays, got, got_arrays, rtol, atol, path="out"):
    """Return a list of human-readable mismatches between two `to_plain` structures."""
    problems = []
    ek, gk = expected["kind"], got["kind"]
    if ek != gk:
        return [f"{path}: MindSpore gave a {ek}, minispore a {gk}"]
    if ek in ("tensor", "ndarray"):
        if expected["dtype"] != got["dtype"]:
            problems.append(f"{path}: dtype {got['dtype']} != MindSpore's {expected['dtype']}")
        e, g = expected_arrays[expected["key"]], got_arrays[got["key"]]
        if e.shape != g.shape:
            return problems + [f"{path}: shape {g.shape} != MindSpore's {e.shape}"]
        if e.dtype.kind in "biuU" and g.dtype.kind in "biuU":
            if not np.array_equal(e, g):
                problems.append(f"{path}: values differ (exact): got {g.ravel()[:8]}, MindSpore {e.ravel()[:8]}")
        else:
            e64, g64 = e.astype(np.float64), g.astype(np.float64)
            if not np.allclose(g64, e64, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(g64 - e64)) if e64.size else 0.0
                problems.append(f"{path}: values differ (max abs err {err:.3g}, rtol {rtol}, atol {atol}): "
                                f"got {g64.ravel()[:6]}, MindSpore {e64.ravel()[:6]}")
        return problems
    if ek == "float":
        if expected["nan"] or got["nan"]:
            return [] if expected["nan"] == got["nan"] else [f"{path}: nan mismatch"]
        if not math.isclose(got["value"], expected["value"], rel_tol=rtol, abs_tol=atol):
            return [f"{path}: {got['value']} != MindSpore's {expected['value']}"]
        return []
    if ek in ("value", "int", "dtype"):
        return [] if expected["value"] == got["value"] else [f"{path}: {got['value']!r} != MindSpore's {expected['value']!r}"]
    if ek in ("tuple", "list"):
        ei, gi = expected["items"], got["items"]
        if len(ei) != len(gi):
            return [f"{path}: {len(gi)} items != MindSpore's {len(ei)}"]
        for i, (e, g) in enumerate(zip(ei, gi)):
            problems += compare(e, expected_arrays, g, got_arrays, rtol, atol, f"{path}[{i}]")
        return problems
    if ek == "dict":
        ei, gi = expected["items"], got["items"]
        if set(ei) != set(gi):
            return [f"{path}: keys {sorted(gi)} != MindSpore's {sorted(ei)}"]
        for k in ei:
            problems += compare(ei[k], expected_arrays, gi[k], got_arrays, rtol, atol, f"{path}[{k!r}]")
        return problems
    return [f"{path}: unknown kind {ek}"]


def golden_path(area):
    return os.path.join(GOLDEN_DIR, f"{area}.npz")
