"""Code generation for compiled graphs: C kernels for fused groups (jit_level O1/O2).

* c_types.py      the C side of a dtype (CType: `t.c`, `t.fn("exp")`, `t.lit(1.0)`), conversions and
                  operand typing; which primitives fuse, and their C expressions, are facts of the
                  primitives themselves (`Primitive.fusion`, minispore/ops/c_expr.py)
* c_kernel.py     one fused group (a KernelSpec) -> the C source of its loop nest
* build.py        C source -> an extension module via cffi, cached on disk by a hash of the source
"""
