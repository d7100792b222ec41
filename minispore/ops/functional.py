"""The functional API (`minispore.ops.add`, `ops.matmul`, ...): every public op function in one
namespace. Each family lives in `ops/prims/<family>.py` and lists its public names in `__all__`;
this module only gathers them."""
import importlib

FAMILIES = ["elementwise", "reduction", "shape", "linalg", "creation", "activation", "reduction_extra",
            "sorting", "shape_extra", "indexing", "nn_ops", "random", "fused",
            "math_extra", "activation_extra", "linalg_extra", "shape_more", "scatter_ops", "interpolate",
            "reduction_more", "nn_layer_ops", "math_more", "array_more", "special", "linalg_decomp", "einsum_ops",
            "state_ops", "functional_compat", "comm"]
__all__ = []
for _name in FAMILIES:
    try:
        _mod = importlib.import_module(f"minispore.ops.prims.{_name}")
    except ModuleNotFoundError as _e:     # a family not written yet (kept while the op set grows)
        if _e.name != f"minispore.ops.prims.{_name}":
            raise
        continue
    for _k in _mod.__all__:
        globals()[_k] = getattr(_mod, _k)
        __all__.append(_k)
