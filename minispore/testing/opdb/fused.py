"""Op table of the fused-operator family (mirrors minispore/ops/prims/fused.py): the attention ops
in `fused_attention`, the layer and quantized-matmul ops in `fused_layers`."""
from . import fused_attention, fused_layers  # noqa: F401  (each registers its entries)
