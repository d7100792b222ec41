"""The object-state guard: what a compiled graph may depend on, read in one place.

* rule.py        - the rule, written once: each kind of state a graph may read, and how it is
                   checked in memory (every jit call) and on disk (the compile cache); the shared
                   definitions (`SCALARS`, the Cell registries and volatile attributes) every
                   reader uses;
* walk.py        - the one walk of a Cell tree: per-layout classification of attributes (one layout
                   cache), the signature lazy_inline shares subgraphs by and jit's layer guard
                   compares, and the depth-first order of the sub-cells (`subcells`) the key uses;
* layer_state.py - those signatures remembered per layer while the Cell state epoch does not move,
                   and `LayerStateCheck`, the O(1) re-check built on them;
* state.py       - StateGuard, checked on every jit call: the scalars and identities of the objects
                   a graph may have read (a `@lazy_inline` layer as one LayerStateCheck);
* contents.py    - plain containers guarded by what they hold; code_reads.py - the names code reads;
* globals_read.py - the guard on the globals the ast mode's interpreted code read (the compile
                   cache rebuilds it for an entry it loads);
* stable.py      - the process-independent rendering of the same facts (`stable_token`), hashed
                   into the compile cache's key.

The Cell state epoch that makes re-checking a snapshot O(1) while no Cell changed is
common/state_epoch.py (Cell itself moves it, below the graph layer). graph/cache.py holds the
in-memory cache built on these (the call key, the globals guard, the entries). Nothing here
imports lazy_inline (jit hands StateGuard lazy_inline's `is_lazy`), and of the trace only its leaf
trace/user_code.py (stable.py: whose code a function is).
"""
