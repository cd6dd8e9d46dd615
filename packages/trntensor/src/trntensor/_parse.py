"""Parsing of einsum subscripts into a canonical form (private).

``parse(subscripts, shapes)`` checks the string against the operands'
shapes and returns ``(terms, output, sizes)``:

* ``terms``: one string of index letters per operand, ellipsis expanded
  into fresh letters (so every letter is one dimension);
* ``output``: the output's letters, implicit output filled in;
* ``sizes``: extent of every letter.

Errors are ``ValueError`` naming the offending index or operand.
"""

from __future__ import annotations

import string

_LETTERS = frozenset(string.ascii_letters)
# letters standing for ellipsis dimensions: Greek and other code points never
# valid in user subscripts, so they cannot clash with user indices
_ELL = "".join(chr(c) for c in range(0x3B1, 0x3B1 + 24)) + "".join(chr(c) for c in range(0x400, 0x400 + 32))


def _check_term(term: str, where: str, k: int | None) -> None:
    body = term.replace("...", "")
    for ch in body:
        if ch not in _LETTERS:
            what = "the output" if k is None else f"operand {k}'s subscripts"
            raise ValueError(f"{where}: invalid index {ch!r} in {what} {term!r}; indices must be letters a-z, A-Z")
    if term.count("...") > 1:
        raise ValueError(f"{where}: more than one ellipsis in {term!r}")


def parse(subscripts: str, shapes: tuple[tuple[int, ...], ...], where: str = "einsum"):
    """Canonical ``(terms, output, sizes, broadcast)`` of an einsum call.

    ``broadcast`` lists, per operand, the positions of size-1 ellipsis
    dimensions that broadcast against a larger extent.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"{where}: subscripts must be a str, got {type(subscripts).__name__}")
    s = subscripts.replace(" ", "")
    if s.count("->") > 1:
        raise ValueError(f"{where}: subscripts {subscripts!r} contain more than one '->'")
    explicit = "->" in s
    lhs, rhs = s.split("->") if explicit else (s, None)
    if "-" in lhs or ">" in lhs or (rhs is not None and ("-" in rhs or ">" in rhs)):
        raise ValueError(f"{where}: a stray '-' or '>' in subscripts {subscripts!r}")
    raw = lhs.split(",")
    if len(raw) != len(shapes):
        raise ValueError(
            f"{where}: subscripts {subscripts!r} name {len(raw)} operand(s) but {len(shapes)} operand(s) were given"
        )
    for k, t in enumerate(raw):
        _check_term(t, where, k)
    if rhs is not None:
        _check_term(rhs, where, None)
    # expand ellipses: the broadcast dims take the most dims any operand gives them
    n_ell = 0
    for k, (t, shp) in enumerate(zip(raw, shapes)):
        named = len(t.replace("...", ""))
        if "..." in t:
            if named > len(shp):
                raise ValueError(f"{where}: operand {k} has {len(shp)} dimension(s) but subscripts {t!r} name {named}")
            n_ell = max(n_ell, len(shp) - named)
        elif named != len(shp):
            raise ValueError(
                f"{where}: operand {k} has {len(shp)} dimension(s) but its subscripts {t!r} name {named}"
            )
    if n_ell > len(_ELL):
        raise ValueError(f"{where}: too many ellipsis dimensions ({n_ell})")
    ell = _ELL[:n_ell]
    terms = []
    for t, shp in zip(raw, shapes):
        if "..." in t:
            e = len(shp) - len(t.replace("...", ""))
            t = t.replace("...", ell[n_ell - e:])
        terms.append(t)
    sizes: dict[str, int] = {}
    broadcast = []
    for k, (t, shp) in enumerate(zip(terms, shapes)):
        for ch, n in zip(t, shp):
            m = sizes.get(ch)
            if m is None or m == n:
                sizes[ch] = n
            elif ch in ell and (m == 1 or n == 1):
                sizes[ch] = max(m, n)
            else:
                name = "an ellipsis dimension" if ch in ell else f"index {ch!r}"
                raise ValueError(
                    f"{where}: inconsistent sizes for {name}: {m} and {n} (operand {k}, subscripts {raw[k]!r})"
                )
    for t, shp in zip(terms, shapes):
        broadcast.append(tuple(p for p, (ch, n) in enumerate(zip(t, shp)) if n == 1 and sizes[ch] != 1))
    if rhs is None:
        counts: dict[str, int] = {}
        for t in terms:
            for ch in t:
                counts[ch] = counts.get(ch, 0) + 1
        output = ell + "".join(sorted(ch for ch, c in counts.items() if c == 1 and ch not in ell))
    else:
        if "..." in rhs:
            output = rhs.replace("...", ell)
        else:
            output = rhs  # ellipsis dimensions missing from an explicit output are summed
        seen = set()
        for ch in output:
            if ch in seen:
                raise ValueError(f"{where}: output index {ch!r} appears more than once in {rhs!r}")
            seen.add(ch)
            if ch not in sizes:
                raise ValueError(f"{where}: output index {ch!r} does not appear in any input")
    return tuple(terms), output, sizes, tuple(broadcast)
