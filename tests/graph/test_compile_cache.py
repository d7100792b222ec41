"""The on-disk compile cache: a second process skips capture; stale or corrupt entries are rebuilt.

Oracles: capture counters (compile_cache.stats()) in a fresh subprocess, results equal to a plain
compilation, and deliberately damaged cache files (truncated JSON, a flipped byte in the constants,
a forged primitive name, a changed source file, another version).
"""
import json
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import minispore as ms
from minispore.common.errors import OpValueError
from minispore.graph import compile_cache as cc

MODEL = textwrap.dedent('''
    """A tiny model module the cache tests import (its source hash is recorded by the cache)."""
    import numpy as np
    import minispore as ms
    from minispore import nn
    from minispore.ops import functional as F


    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.w = ms.Parameter(ms.Tensor(rng.normal(size=(4, 3)).astype(np.float32)), name="w")
            self.table = ms.Tensor(np.arange(3, dtype=np.float32))       # a tensor attribute

        def construct(self, x):
            h = F.matmul(x, self.w) + self.table
            return (F.tanh(h) * ms.Tensor(np.float32(0.5))).sum()       # a constant built in the trace


    net = Net()
    grad_fn = ms.value_and_grad(net, None, net.trainable_params())


    def step(x):
        return grad_fn(x)
''')

CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import minispore as ms
    from minispore.graph import compile_cache
    sys.path.insert(0, sys.argv[1])
    import cache_model as m
    ms.set_context(enable_compile_cache=True, compile_cache_path=sys.argv[2])
    jf = ms.jit(m.step, capture_mode=sys.argv[3])
    x = ms.Tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    loss, (gw,) = jf(x)
    print(json.dumps({"stats": compile_cache.stats(), "loss": float(loss.asnumpy()), "gw": gw.asnumpy().tolist()}))
''')


@pytest.fixture
def model_dir(tmp_path, monkeypatch):
    d = tmp_path / "model"
    d.mkdir()
    (d / "cache_model.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(d))
    sys.modules.pop("cache_model", None)
    yield d
    sys.modules.pop("cache_model", None)


@pytest.fixture
def cache_on(tmp_path):
    path = tmp_path / "cache.ms"
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(path))
    cc.reset_stats()
    yield path
    ms.set_context(enable_compile_cache=False, compile_cache_path="")


def x_input():
    return ms.Tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))


def entry_files(path):
    d = path / "rank_0" / "graph_cache"
    return sorted(d.glob("*.json")), sorted(d.glob("*.bin"))


def compile_fresh(capture_mode="trace"):
    import cache_model as m
    jf = ms.jit(m.step, capture_mode=capture_mode)
    return jf, jf(x_input())


def run_child(model_dir, cache_path, mode="trace"):
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), str(cache_path), mode],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["trace", "ast"])
def test_a_second_process_skips_capture(model_dir, tmp_path, mode):
    cache_path = tmp_path / "cache.ms"
    first = run_child(model_dir, cache_path, mode)
    second = run_child(model_dir, cache_path, mode)
    assert first["stats"]["captures"] == 1 and first["stats"]["stores"] == 1
    assert second["stats"]["captures"] == 0 and second["stats"]["hits"] == 1
    assert second["loss"] == first["loss"]
    np.testing.assert_array_equal(second["gw"], first["gw"])


def test_loaded_graph_equals_the_captured_one(model_dir, cache_on):
    jf1, (loss1, (gw1,)) = compile_fresh()
    g1 = jf1.compile(x_input()).graph
    assert cc.stats()["stores"] == 1
    jf2, (loss2, (gw2,)) = compile_fresh()            # a new function object: its in-memory cache is empty
    g2 = jf2.compile(x_input()).graph
    assert cc.stats()["hits"] == 1 and cc.stats()["captures"] == 1
    assert [n.op.name for n in g1.nodes] == [n.op.name for n in g2.nodes]
    assert [n.attrs for n in g1.nodes] == [n.attrs for n in g2.nodes]
    assert [n.source for n in g1.nodes] == [n.source for n in g2.nodes]
    assert [o.aval for n in g1.nodes for o in n.outputs] == [o.aval for n in g2.nodes for o in n.outputs]
    # the parameter is shared by reference (an optimizer's update is seen), constants are equal copies
    caps2 = [t for _, t in g2.captures]
    import cache_model as m
    assert any(t is m.net.w for t in caps2) and any(t is m.net.table for t in caps2)
    assert len(caps2) == len(g1.captures) == 3
    assert loss1.asnumpy() == loss2.asnumpy()
    np.testing.assert_array_equal(gw1.asnumpy(), gw2.asnumpy())
    m.net.w.set_data(ms.Tensor(np.zeros((4, 3), np.float32)))
    loss3, _ = jf2(x_input())
    np.testing.assert_allclose(loss3.asnumpy(), (np.tanh(np.arange(3.0)) * 0.5).sum() * 2, rtol=1e-6)


def test_the_file_format_is_json_with_primitive_names(model_dir, cache_on):
    compile_fresh()
    (js,), (bins,) = entry_files(cache_on)
    head, _, body = js.read_bytes().partition(b"\n")
    header, payload = json.loads(head), json.loads(body)
    assert header["format"] == cc.FORMAT and header["versions"][0] == ms.__version__
    assert any(f.endswith("cache_model.py") for f in header["sources"])
    ops = {n[0] for g in payload["graphs"] for n in g["nodes"]}
    assert {"matmul", "tanh", "add"} <= ops
    assert b"pickle" not in js.read_bytes() and bins.stat().st_size > 0


def damage_and_recompile(cache_on, damage):
    compile_fresh()
    (js,), bins = entry_files(cache_on)
    damage(js, bins)
    before = cc.stats()
    jf, (loss, (gw,)) = compile_fresh()
    after = cc.stats()
    return before, after, loss, gw, js


@pytest.mark.parametrize("damage", ["truncate", "garbage", "constants", "forged_primitive"])
def test_corrupt_entries_are_detected_and_rebuilt(model_dir, cache_on, damage):
    def truncate(js, bins):
        js.write_bytes(js.read_bytes()[:100])

    def garbage(js, bins):
        js.write_bytes(b"{not json")

    def constants(js, bins):
        data = bytearray(bins[0].read_bytes())
        data[0] ^= 0xFF
        bins[0].write_bytes(bytes(data))

    def forged_primitive(js, bins):
        # a consistent checksum but a primitive that does not exist: never looked up as code
        head, _, body = js.read_bytes().partition(b"\n")
        body = body.replace(b'"tanh"', b'"os.system"')
        import hashlib
        header = json.loads(head)
        header["payload_sha256"] = hashlib.sha256(body).hexdigest()
        js.write_bytes(json.dumps(header).encode() + b"\n" + body)

    fns = dict(truncate=truncate, garbage=garbage, constants=constants, forged_primitive=forged_primitive)
    before, after, loss, gw, js = damage_and_recompile(cache_on, fns[damage])
    assert after["corrupt"] == before["corrupt"] + 1
    assert after["captures"] == before["captures"] + 1        # captured again ...
    assert after["stores"] == before["stores"] + 1            # ... and the entry rewritten
    ms.set_context(enable_compile_cache=False)
    _, (loss0, (gw0,)) = compile_fresh()
    assert loss.asnumpy() == loss0.asnumpy()
    np.testing.assert_array_equal(gw.asnumpy(), gw0.asnumpy())
    ms.set_context(enable_compile_cache=True)
    cc.reset_stats()
    compile_fresh()
    assert cc.stats()["hits"] == 1                            # the rewritten entry is good


def test_stale_entries_changed_source_or_version(model_dir, cache_on):
    compile_fresh()
    # a comment changes the file but not the function's code: same key, stale by its source hash
    path = model_dir / "cache_model.py"
    path.write_text(path.read_text() + "\n# edited\n")
    cc.reset_stats()
    compile_fresh()
    assert cc.stats()["stale"] == 1 and cc.stats()["captures"] == 1
    compile_fresh()
    assert cc.stats()["hits"] == 1
    # another minispore version wrote it
    (js,), _ = entry_files(cache_on)
    head, _, body = js.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["versions"][0] = "0.0.0-other"
    js.write_bytes(json.dumps(header).encode() + b"\n" + body)
    cc.reset_stats()
    compile_fresh()
    assert cc.stats()["stale"] == 1 and cc.stats()["captures"] == 1


def test_new_shapes_and_changed_state_get_new_keys(model_dir, cache_on):
    import cache_model as m
    jf = ms.jit(m.step, capture_mode="trace")
    jf(x_input())
    jf(ms.Tensor(np.ones((5, 4), np.float32)))
    assert len(entry_files(cache_on)[0]) == 2
    m.net.set_train(True)                         # a plain attribute of the cell: part of the key
    try:
        compile_fresh()
    finally:
        m.net.set_train(False)
    assert len(entry_files(cache_on)[0]) == 3


def test_unwritable_directory_is_reported_once_and_bypassed(model_dir, tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(blocker))
    try:
        with pytest.warns(RuntimeWarning, match="cannot be written"):
            _, (loss, _) = compile_fresh()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _, (loss2, _) = compile_fresh()          # no second warning, still correct
    finally:
        ms.set_context(enable_compile_cache=False, compile_cache_path="")
    assert loss.asnumpy() == loss2.asnumpy()


def test_environment_variables_enable_the_cache(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MS_COMPILER_CACHE_ENABLE", "1")
    monkeypatch.setenv("MS_COMPILER_CACHE_PATH", str(tmp_path / "env_cache"))
    monkeypatch.setenv("RANK_ID", "3")
    assert cc.enabled()
    compile_fresh()
    assert list((tmp_path / "env_cache" / "rank_3" / "graph_cache").glob("*.json"))


def test_lazy_inline_subgraphs_round_trip(cache_on):
    from minispore import nn
    from minispore.ops import functional as F

    class Block(nn.Cell):
        @ms.lazy_inline
        def __init__(self, i):
            super().__init__()
            self.w = ms.Parameter(ms.Tensor(np.full((3, 3), 0.1 * (i + 1), np.float32)), name=f"w{i}")

        def construct(self, x):
            return F.tanh(F.matmul(x, self.w))

    blocks = nn.CellList([Block(i) for i in range(3)])
    gf = ms.value_and_grad(lambda x: blocks[2](blocks[1](blocks[0](x))).sum(), None, blocks.trainable_params())

    def lazy_step(x):
        return gf(x)

    x = ms.Tensor(np.ones((2, 3), np.float32))
    (l1, g1) = ms.jit(lazy_step, capture_mode="trace")(x)
    (l2, g2) = ms.jit(lazy_step, capture_mode="trace")(x)
    assert cc.stats()["hits"] == 1
    assert l1.asnumpy() == l2.asnumpy()
    for a, b in zip(g1, g2):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_uncacheable_functions_still_run(cache_on):
    class Holder:                          # a plain object: the cache does not look for tensors inside it
        def __init__(self):
            self.p = ms.Parameter(ms.Tensor(np.ones(3, np.float32)), name="hidden")

    holder = Holder()

    def f(x):
        return x * holder.p

    out = ms.jit(f, capture_mode="trace")(ms.Tensor(np.arange(3, dtype=np.float32)))
    np.testing.assert_array_equal(out.asnumpy(), np.arange(3, dtype=np.float32))
    assert cc.stats()["uncacheable"] == 1 and cc.stats()["stores"] == 0
    assert not entry_files(cache_on)[0]


def test_context_validation():
    with pytest.raises(OpValueError, match="set_context"):
        ms.set_context(enable_compile_cache="yes")
    with pytest.raises(OpValueError, match="set_context"):
        ms.set_context(compile_cache_path=3)
