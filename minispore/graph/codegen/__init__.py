"""Code generation for compiled graphs: C kernels for fused groups (jit_level O1/O2).

* fusible_ops.py  THE table: which primitives fuse, and each one's C expression
* c_kernel.py     one fused group (a KernelSpec) -> the C source of its loop nest
* build.py        C source -> an extension module via cffi, cached on disk by a hash of the source
"""
