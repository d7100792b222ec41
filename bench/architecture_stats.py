"""Structure figures for the architecture page: size per folder, files a reader crosses, cycles.

    .venv/bin/python bench/architecture_stats.py            # a markdown report on stdout
    .venv/bin/python bench/architecture_stats.py --json     # the same figures as JSON

* **files and lines per folder** of the `minispore` package (non-blank lines of .py files);
* **files crossed**: the distinct minispore source files whose code runs while one call executes,
  recorded with `sys.setprofile` after a warm-up call - for eager `a + b`, and for a call of a
  function compiled with `ms.jit` at O0 (the steady state, after the capture);
* **import cycles**: strongly connected groups of modules in the import graph (grimp, which also
  sees imports inside functions), and the subpackage-level edges that go the wrong way.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "minispore")


def lines_per_folder() -> dict:
    table = collections.defaultdict(lambda: [0, 0])
    for dirpath, dirnames, filenames in os.walk(PKG):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        rel = os.path.relpath(dirpath, ROOT)
        for name in filenames:
            if name.endswith(".py"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    n = sum(1 for line in f if line.strip())
                table[rel][0] += 1
                table[rel][1] += n
    return dict(sorted(table.items()))


def files_crossed(fn) -> list[str]:
    fn()                                    # warm-up: captures, caches and lazy imports happen here
    seen = set()

    def prof(frame, event, arg):
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(PKG + os.sep):
                seen.add(os.path.relpath(path, ROOT))
    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return sorted(seen)


def _eager_add():
    import numpy as np
    import minispore as ms
    a = ms.Tensor(np.ones((4, 4), np.float32))
    b = ms.Tensor(np.ones((4, 4), np.float32))
    return lambda: a + b


def _jit_o0_call():
    import numpy as np
    import minispore as ms

    @ms.jit(jit_level="O0")
    def f(x, y):
        return ms.ops.relu(x @ y) + 1.0

    x = ms.Tensor(np.ones((4, 4), np.float32))
    y = ms.Tensor(np.ones((4, 4), np.float32))
    return lambda: f(x, y)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the module graph is deep enough to hit Python's recursion limit)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                    stack.append(nxt); on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop(); on_stack.discard(m); group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def import_cycles() -> dict:
    import grimp
    g = grimp.build_graph("minispore")
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    cycles = _strongly_connected(graph)
    return {"modules": len(g.modules), "cycles": len(cycles),
            "largest_cycle": max((len(c) for c in cycles), default=0),
            "cycle_members": cycles}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    report = {"folders": lines_per_folder(),
              "files_crossed": {"eager a + b": files_crossed(_eager_add()),
                                "jit O0 call": files_crossed(_jit_o0_call())},
              "imports": import_cycles()}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print("| folder | files | lines |\n| --- | ---: | ---: |")
    tf = tl = 0
    for folder, (files, lines) in report["folders"].items():
        print(f"| `{folder}` | {files} | {lines:,} |")
        tf, tl = tf + files, tl + lines
    print(f"| **total** | {tf} | {tl:,} |\n")
    for what, files in report["files_crossed"].items():
        print(f"**{what}** crosses {len(files)} files: " + ", ".join(f"`{f}`" for f in files) + "\n")
    imp = report["imports"]
    print(f"**imports**: {imp['modules']} modules, {imp['cycles']} import cycles "
          f"(largest: {imp['largest_cycle']} modules)")


if __name__ == "__main__":
    main()
