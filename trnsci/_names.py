"""Backend names that also answer to the published trnsci packages' spellings.

The published packages called the torch fallback ``"pytorch"``; the suite
calls it ``"torch"`` (and accepts ``"pytorch"`` as an alias when setting a
backend). What the suite *reports* -- ``get_backend()``, a plan's
``backend`` -- is a :class:`BackendName`: a ``str`` equal to its own value
and also to the published alias, so code written against the published
packages (``plan.backend == "pytorch"``) keeps its meaning. It prints,
hashes and serializes as the suite's name (``"torch"``).
"""

from __future__ import annotations

#: The suite's names -> the published packages' name for the same kind of route. The published
#: "pytorch" meant "the host fallback, not an NKI kernel": trntensor's autotuner may put a CPU GEMM
#: step on numpy.matmul, which is that too; a plan's "+"-joined names qualify when every part does.
PUBLISHED = {"torch": "pytorch", "numpy": "pytorch"}


def _published(name: str):
    parts = {PUBLISHED.get(p) for p in name.split("+")}
    return parts.pop() if len(parts) == 1 else None


class BackendName(str):
    """A backend name that compares equal to the published alias as well (``"torch" == "pytorch"``).

    Examples
    --------
    >>> from trnsci._names import BackendName
    >>> b = BackendName("torch")
    >>> b == "torch", b == "pytorch", b == "nki", str(b)
    (True, True, False, 'torch')
    >>> BackendName("numpy+torch") == "pytorch", BackendName("simulator+torch") == "pytorch"
    (True, False)
    """

    __slots__ = ()

    def __eq__(self, other):
        if isinstance(other, str):
            mine = str(self)
            return str.__eq__(mine, other) or (_published(mine) or "") == str(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return repr(str.__str__(self))
