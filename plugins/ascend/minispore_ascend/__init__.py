"""minispore-ascend: minispore's Ascend plugin (CANN's ACL runtime and aclnn operators via ctypes,
or the CPU emulator of them in plugins/ascend/emulator when no CANN is installed).

    import minispore as ms
    ms.set_context(device_target="Ascend")      # found through the `minispore.backends` entry point

Modules: acl/ (library loading, prototypes, errors, runtime + memory pool), aclnn.py (two-phase
calls), kernels.py (primitive -> aclnn table), attention.py (fused FlashAttentionScore, and the
flash_attention_score primitives' kernels), fallback.py (one call handed to the CPU reference),
backend.py (AscendBackend), kbk.py (the kernel-by-kernel graph executor over the core's DevicePlan).
"""
__version__ = "0.1.0"
