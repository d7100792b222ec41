"""ctypes bindings of the ACL runtime and aclnn (loader.py), their errors (errors.py), and the
runtime objects built on them: device, memory pool, streams, events (runtime.py)."""
