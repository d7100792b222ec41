import os

import pytest


@pytest.fixture(scope="session")
def kernel_cache(tmp_path_factory):
    """One on-disk kernel cache for the whole test session (compiled fused-kernel modules are
    reused across tests instead of landing in ~/.cache). Modules that compile kernels use it with
    `pytestmark = pytest.mark.usefixtures("kernel_cache")`."""
    path = str(tmp_path_factory.getbasetemp() / "minispore-cache")
    old = os.environ.get("MINISPORE_CACHE_DIR")
    os.environ["MINISPORE_CACHE_DIR"] = path
    yield path
    if old is None:
        os.environ.pop("MINISPORE_CACHE_DIR", None)
    else:
        os.environ["MINISPORE_CACHE_DIR"] = old
