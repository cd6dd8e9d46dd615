"""Contraction path search: pure functions, kept apart from execution.

A path function takes the operands' index strings (``terms``, each index
once per term: repeated indices and broadcast dimensions are resolved
before planning), the ``output`` string, ``sizes`` (index -> extent) and a
``memory_limit`` (largest intermediate in elements, or None) and returns
the pairwise contraction order as *ssa* pairs ``(a, b)``: ids ``0..n-1``
are the operands, ``n, n+1, ...`` the results in the order they are made.
It returns None when no order meets the memory limit. Path functions touch
no tensors; :mod:`trntensor.plan` turns their order into executable steps.

Registered functions (:data:`PATHS`, extended by :func:`register`):

``"optimal"`` (aliases ``"dp"``; what ``"auto"`` uses up to :data:`AUTO_DP_MAX` operands)
    Up to :data:`OUTER_MAX` operands, every pairwise tree (outer products
    included, as opt_einsum's ``optimal``). Beyond,
    dynamic programming over the *connected* subsets of operands (two
    groups are only joined when they share an index; disconnected groups
    are joined last by outer products, smallest first), with a cost cap:
    a pass keeps only partial trees whose cost is within the cap; the first
    pass that completes the whole set is exact for this search space,
    because every subtree of a cheaper tree is cheaper still. The first
    cap is a fraction of the greedy path's cost, raised fourfold per pass.
    It finds the cheapest tree that never multiplies unrelated operands
    (opt_einsum's ``dp`` searches the same space, minimising a slightly
    different cost).
``"exhaustive"``
    Every split of every subset (``3^n``), outer products included: the
    cheapest tree of any shape, for small ``n`` only.
``"greedy"``
    Repeatedly the pair whose result shrinks memory most (``O(n^3)``).

Cost model (the one plans report; see :mod:`trntensor.plan`): a pairwise
step over the index set ``I`` costs ``prod(size[I])`` times 2 when it sums
over an index (one multiply-add = 2 flops), times 1 when it sums nothing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

__all__ = ["PATHS", "register", "find_path", "path_cost", "AUTO_DP_MAX", "AUTO_DP_BUDGET", "BudgetExceeded"]

#: ``optimize="auto"`` runs "optimal" up to this many operands (first-plan times in docs/trntensor.md),
#: "greedy" beyond.
AUTO_DP_MAX = 20
#: "optimal" up to this many operands searches every tree, outer products included (3**n splits: 2187 at 7);
#: beyond, the connected-subset DP. An outer product of two small operands can pay when both then meet a
#: large one (docs/perf-notes.md#design-einsum-paths).
OUTER_MAX = 7
#: ... and gives up (falling back to "greedy") after this many candidate pairs: the bound on a first
#: plan's search, above what the densest random networks of up to 20 operands need
#: (docs/perf-notes.md#design-einsum-paths).
AUTO_DP_BUDGET = 10**7


class BudgetExceeded(RuntimeError):
    """A path search gave up after its budget of candidate pairs (``optimal(..., budget=)``)."""

PATHS: dict[str, Callable] = {}

# The DP's cost cap: the first pass keeps partial trees up to (greedy path's cost) / _CAP_START, each
# failed pass multiplies the cap by _CAP_STEP.
_CAP_START = 64
_CAP_STEP = 4


def register(name: str):
    """Decorator: make ``fn(terms, output, sizes, memory_limit) -> ssa pairs | None`` a named path method."""
    def deco(fn):
        PATHS[name] = fn
        return fn
    return deco


def find_path(method: str, terms, output, sizes, memory_limit=None, **options):
    """The ssa pairs of ``method`` (a key of :data:`PATHS`) for these terms; ``options`` go to the method."""
    if len(terms) < 2:
        return []
    return PATHS[method](list(terms), output, sizes, memory_limit, **options)


def _prod(sizes, letters) -> int:
    p = 1
    for ch in letters:
        p *= sizes[ch]
    return p


def _step_cost(touched, removed: bool, sizes) -> int:
    return _prod(sizes, touched) * (2 if removed else 1)


def path_cost(terms, output, sizes, pairs) -> int:
    """The cost of ssa ``pairs`` over ``terms`` under the module's cost model."""
    live = {k: frozenset(t) for k, t in enumerate(terms)}
    out = frozenset(output)
    total, nxt = 0, len(terms)
    for a, b in pairs:
        ta, tb = live.pop(a), live.pop(b)
        rest = set().union(*live.values()) | out
        touched = ta | tb
        res = frozenset(ch for ch in touched if ch in rest)
        total += _step_cost(touched, touched != res, sizes)
        live[nxt] = res
        nxt += 1
    return total


# ------------------------------------------------------------------ greedy

@register("greedy")
def greedy(terms, output, sizes, memory_limit=None):
    """Greedy: repeatedly contract the pair whose result shrinks memory most.

    Candidates are pairs sharing an index (outer products only when nothing
    else is left); the score is ``size(result) - size(a) - size(b)`` with
    the step's flops breaking ties, as in opt_einsum's greedy.
    """
    n = len(terms)
    live = {k: frozenset(t) for k, t in enumerate(terms)}
    out = frozenset(output)
    pairs = []
    nxt = n
    while len(live) > 1:
        keys = list(live)
        count = collections.Counter()
        for k in keys:
            count.update(live[k])
        best = None
        for share in (True, False):
            for i in range(len(keys)):
                a = live[keys[i]]
                for j in range(i + 1, len(keys)):
                    b = live[keys[j]]
                    if share and not (a & b):
                        continue
                    touched = a | b
                    res = frozenset(ch for ch in touched if ch in out or count[ch] > (ch in a) + (ch in b))
                    rs = _prod(sizes, res)
                    if memory_limit is not None and len(live) > 2 and rs > memory_limit:
                        continue
                    score = (rs - _prod(sizes, a) - _prod(sizes, b), _step_cost(touched, touched != res, sizes))
                    if best is None or score < best[0]:
                        best = (score, keys[i], keys[j], res)
            if best is not None:
                break
        if best is None:
            return None
        _, i, j, res = best
        pairs.append((i, j))
        del live[i], live[j]
        live[nxt] = res
        nxt += 1
    return pairs


# ------------------------------------------------------------------ bit-set helpers

class _Bits:
    """Indices as bits: masks of the terms and output, each index's owners, extents of masks (memoised)."""

    def __init__(self, terms, output, sizes):
        letters = sorted(set("".join(terms)) | set(output))
        self.bit = {ch: 1 << k for k, ch in enumerate(letters)}
        self.ext = [sizes[ch] for ch in letters]
        self.masks = [self.mask(t) for t in terms]
        self.out = self.mask(output)
        self.owners = [0] * len(letters)  # per index: the operands (bits) holding it
        for k, m in enumerate(self.masks):
            while m:
                low = m & -m
                self.owners[low.bit_length() - 1] |= 1 << k
                m ^= low
        self._size: dict[int, int] = {}

    def mask(self, letters) -> int:
        m = 0
        for ch in letters:
            m |= self.bit[ch]
        return m

    def size(self, m: int) -> int:
        v = self._size.get(m)
        if v is None:
            v, mm = 1, m
            while mm:
                low = mm & -mm
                v *= self.ext[low.bit_length() - 1]
                mm ^= low
            self._size[m] = v
        return v

    def join(self, s: int, k1: int, k2: int):
        """Kept indices and step cost of joining groups with kept index masks ``k1``, ``k2`` into group ``s``."""
        gone = 0
        shared = k1 & k2 & ~self.out  # an index summed here is on both sides (see optimal's docstring)
        while shared:
            low = shared & -shared
            if not self.owners[low.bit_length() - 1] & ~s:
                gone |= low
            shared ^= low
        touched = k1 | k2
        return touched & ~gone, self.size(touched) * (2 if gone else 1)


def _components(bits: _Bits, n: int):
    """Operands grouped by shared indices (connected components), each a list in ascending order."""
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for own in bits.owners:
        first = None
        while own:
            low = own & -own
            k = low.bit_length() - 1
            if first is None:
                first = find(k)
            else:
                parent[find(k)] = first
            own ^= low
    groups: dict[int, list] = {}
    for k in range(n):
        groups.setdefault(find(k), []).append(k)
    return list(groups.values())


def _flatten(tree, pairs, counter):
    """Post-order ssa pairs of a nested-tuple tree (leaves are operand ids); returns the root's id."""
    if isinstance(tree, int):
        return tree
    a = _flatten(tree[0], pairs, counter)
    b = _flatten(tree[1], pairs, counter)
    pairs.append((a, b))
    counter[0] += 1
    return counter[0] - 1


# ------------------------------------------------------------------ optimal: connected-subset DP

def _dp_connected(bits: _Bits, nodes, cap, memory_limit, budget):
    """Cheapest tree over operands ``nodes`` (connected) joining only groups that share an index.

    Keeps, per group size, the best ``(cost, kept mask, tree)`` of each
    connected subset whose cost stays ``<= cap``; returns the whole set's
    entry, or None when no tree fits the cap (or the memory limit).
    """
    full = 0
    for k in nodes:
        full |= 1 << k
    levels = [None, {1 << k: (0, bits.masks[k] & (bits.out | _outside(bits, k)), k) for k in nodes}]
    m = len(nodes)
    for size in range(2, m + 1):
        cur: dict[int, tuple] = {}
        for a in range(1, size // 2 + 1):
            La, Lb = levels[a], levels[size - a]
            same = a == size - a
            for s1, (c1, k1, t1) in La.items():
                if c1 > cap:
                    continue
                budget[0] -= len(Lb)
                if budget[0] < 0:
                    raise BudgetExceeded("optimal: the path search's budget of candidate pairs ran out")
                for s2, (c2, k2, t2) in Lb.items():
                    if s1 & s2 or (same and s2 < s1) or not (k1 & k2):
                        continue
                    base = c1 + c2
                    if base > cap:
                        continue
                    s = s1 | s2
                    kept, step = bits.join(s, k1, k2)
                    c = base + step
                    if c > cap:
                        continue
                    if memory_limit is not None and s != full and bits.size(kept) > memory_limit:
                        continue
                    old = cur.get(s)
                    if old is None or c < old[0]:
                        cur[s] = (c, kept, (t1, t2))
        levels.append(cur)
    return levels[m].get(full)


def _outside(bits: _Bits, k: int) -> int:
    """Indices of operand ``k`` that some other operand also holds."""
    m, keep = bits.masks[k], 0
    mm = m
    while mm:
        low = mm & -mm
        if bits.owners[low.bit_length() - 1] & ~(1 << k):
            keep |= low
        mm ^= low
    return keep


@register("optimal")
def optimal(terms, output, sizes, memory_limit=None, budget=None):
    """The cheapest tree: of any shape up to :data:`OUTER_MAX` operands, else one that joins only operand
    groups sharing an index (module docstring).

    ``budget``: candidate pairs to examine at most (None: no bound); past it
    :class:`BudgetExceeded` is raised.
    """
    n = len(terms)
    budget = [float("inf") if budget is None else budget]
    bits = _Bits(terms, output, sizes)
    if n <= OUTER_MAX:  # few operands: every tree, outer products included (3**n splits, cheap here)
        return _every_tree(bits, n, memory_limit, leaf_sums=True)
    roots = []  # (size of result, kept mask, tree) per connected component
    for nodes in _components(bits, n):
        if len(nodes) == 1:
            k = nodes[0]
            roots.append((bits.size(bits.masks[k]), bits.masks[k], k))
            continue
        sub_terms = [terms[k] for k in nodes]
        sub_out = "".join(ch for ch in sorted(set("".join(sub_terms))) if bits.bit[ch] & bits.out)
        g = greedy(sub_terms, sub_out, sizes, memory_limit)
        upper = path_cost(sub_terms, sub_out, sizes, g) if g is not None else None
        # caps from a fraction of the greedy cost upwards; past it (the greedy tree joined unrelated
        # operands, or met no memory limit) one uncapped pass, which is exhaustive over this space
        cap = max(1, upper // _CAP_START) if upper is not None else float("inf")
        while True:
            best = _dp_connected(bits, nodes, cap, memory_limit, budget)
            if best is not None or cap == float("inf"):
                break
            cap = cap * _CAP_STEP if cap < _CAP_STEP * upper else float("inf")
        if best is None:
            return None
        _, kept, tree = best
        roots.append((bits.size(kept), kept, tree))
    roots.sort(key=lambda r: r[0])  # unrelated groups: outer products, smallest first
    _, kept, tree = roots[0]
    for q, (_, k2, t2) in enumerate(roots[1:], 2):
        kept |= k2
        if memory_limit is not None and q < len(roots) and bits.size(kept) > memory_limit:
            return None
        tree = (tree, t2)
    pairs: list = []
    _flatten(tree, pairs, [n])
    return pairs


# ------------------------------------------------------------------ exhaustive: every split (3^n)

@register("exhaustive")
def exhaustive(terms, output, sizes, memory_limit=None):
    """Exhaustive DP over operand subsets (``3^n``): the cheapest pairwise tree of any shape."""
    return _every_tree(_Bits(terms, output, sizes), len(terms), memory_limit, leaf_sums=False)


def _every_tree(bits: _Bits, n: int, memory_limit, leaf_sums: bool):
    """The cheapest pairwise tree of any shape, outer products included (``3^n`` splits).

    ``leaf_sums``: an index held by one operand only (and not in the output) costs nothing (the plan sums
    it as its own step before the pairwise ones, as :func:`optimal`'s leaves); else it is summed by the
    operand's first pairwise step (``exhaustive``, opt_einsum's count).
    """
    full = (1 << n) - 1
    union = [0] * (1 << n)
    for s in range(1, 1 << n):
        low = s & -s
        union[s] = union[s ^ low] | bits.masks[low.bit_length() - 1]
    kept = [0] * (1 << n)
    for s in range(1, 1 << n):
        kept[s] = union[s] & (union[full ^ s] | bits.out)
    INF = float("inf")
    cost = [INF] * (1 << n)
    choice = [0] * (1 << n)
    for k in range(n):
        cost[1 << k] = 0
        kept[1 << k] = bits.masks[k] & (bits.out | _outside(bits, k)) if leaf_sums else bits.masks[k]
    for s in sorted(range(1, 1 << n), key=lambda s: bin(s).count("1")):
        if s & (s - 1) == 0:
            continue
        if memory_limit is not None and s != full and bits.size(kept[s]) > memory_limit:
            continue
        low = s & -s
        rest = s ^ low
        best, arg = INF, 0
        sub = rest
        while True:
            a = sub | low  # the part holding the lowest operand
            b = s ^ a
            if b:
                ca, cb = cost[a], cost[b]
                if ca + cb < best:
                    touched = kept[a] | kept[b]
                    c = ca + cb + bits.size(touched) * (2 if touched & ~kept[s] else 1)
                    if c < best:
                        best, arg = c, a
            if sub == 0:
                break
            sub = (sub - 1) & rest
        cost[s], choice[s] = best, arg
    if cost[full] == INF:
        return None
    pairs: list = []

    def build(s):
        if s & (s - 1) == 0:
            return s.bit_length() - 1
        a = choice[s]
        ia, ib = build(a), build(s ^ a)
        pairs.append((ia, ib))
        return n + len(pairs) - 1

    build(full)
    return pairs


PATHS["dp"] = optimal
