"""The op table, one module per op family (mirrors minispore/ops/prims/)."""
import importlib

FAMILIES = ["elementwise", "reduction", "shape", "linalg", "creation", "activation", "reduction_extra",
            "sorting", "shape_extra", "indexing", "nn_ops", "losses", "random", "fused",
            "math_extra", "activation_extra", "linalg_extra", "shape_more", "scatter_ops", "interpolate",
            "reduction_more", "nn_layer_ops", "math_more", "array_more", "special", "linalg_decomp", "einsum_ops",
            "functional_compat", "comm"]
for _name in FAMILIES:
    try:
        importlib.import_module(f"{__name__}.{_name}")
    except ModuleNotFoundError as _e:      # a family not written yet
        if _e.name != f"{__name__}.{_name}":
            raise
