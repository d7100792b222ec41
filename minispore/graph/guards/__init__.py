"""The object-state guard: what a compiled graph may depend on, read in one place.

* rule.py   - the rule, written once: each kind of state a graph may read, and how it is checked
              in memory (every jit call) and on disk (the compile cache); the shared definitions
              (`SCALARS`, the Cell registries and volatile attributes) every walker uses;
* walk.py   - the one walk of a Cell tree: per-layout classification of attributes, and the
              signature lazy_inline shares subgraphs by and jit's layer guard compares;
* stable.py - the process-independent rendering of the same facts (`stable_token`), hashed into
              the compile cache's key.

The Cell state epoch that makes re-checking a snapshot O(1) while no Cell changed is
common/state_epoch.py (Cell itself moves it, below the graph layer). graph/cache.py holds the
in-memory guards built on these (StateGuard, the container and globals guards) and
graph/layer_state.py the remembered layer signatures.
"""
