"""The O1 kernels are compiled with `no-trapping-math` (fusion._VECTOR_SELECTS), so that their
`?:` selects on floats vectorize. The flag must change no value: NaN propagation of maximum /
minimum / relu, signed zeros and infinities must still equal NumPy's, bit for bit."""
import numpy as np

import minispore as ms
from minispore import ops
from minispore.graph.passes import fusion


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4099).astype(np.float32)          # not a multiple of the vector width
    y = rng.standard_normal(4099).astype(np.float32)
    x[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45]
    y[:8] = [1.0, np.nan, -np.inf, np.inf, -0.0, 0.0, np.nan, 3.0]
    return x, y


def _f(x, y):
    return ops.relu(x * y + 1.0) + ops.maximum(x, y) * ops.minimum(x, 0.5) - ops.where(x > y, x, y)


def _reference(x, y):
    return (np.maximum(x * y + np.float32(1.0), np.float32(0.0)) + np.maximum(x, y) * np.minimum(x, np.float32(0.5))
            - np.where(x > y, x, y))


def test_the_generated_kernels_carry_the_flag_and_fuse(monkeypatch):
    assert "no-trapping-math" in fusion._VECTOR_SELECTS
    sources = []
    real = fusion.B.build_each

    def spy(kernels, *a, **k):
        sources.extend(src for src, _ in kernels.values())
        return real(kernels, *a, **k)
    monkeypatch.setattr(fusion.B, "build_each", spy)
    x, y = _inputs()
    jf = ms.jit(_f, jit_level="O1")
    got = jf(ms.Tensor(x), ms.Tensor(y)).asnumpy()
    assert sources and all(src.startswith(fusion._VECTOR_SELECTS) for src in sources)
    with np.errstate(invalid="ignore"):
        want = _reference(x, y)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))     # bitwise, signed zeros too


def test_o1_equals_pynative_bitwise_on_selects():
    x, y = _inputs()
    with np.errstate(invalid="ignore"):
        eager = _f(ms.Tensor(x), ms.Tensor(y)).asnumpy()
    o1 = ms.jit(_f, jit_level="O1")(ms.Tensor(x), ms.Tensor(y)).asnumpy()
    np.testing.assert_array_equal(eager, o1)
