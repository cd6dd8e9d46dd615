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

#: The suite's name -> the published packages' name for the same backend.
PUBLISHED = {"torch": "pytorch"}


class BackendName(str):
    """A backend name that compares equal to the published alias as well (``"torch" == "pytorch"``).

    Examples
    --------
    >>> from trnsci._names import BackendName
    >>> b = BackendName("torch")
    >>> b == "torch", b == "pytorch", b == "nki", str(b)
    (True, True, False, 'torch')
    """

    __slots__ = ()

    def __eq__(self, other):
        if isinstance(other, str):
            mine = str(self)
            return str.__eq__(mine, other) or PUBLISHED.get(mine) == str(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return repr(str.__str__(self))
