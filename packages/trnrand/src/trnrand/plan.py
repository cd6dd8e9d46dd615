"""Ask which backend and which kernels a trnrand call would run, and why, without running it.

:func:`plan` is a thin use of :func:`trnsci.dispatch.plan_call` (through
:func:`trnsci.dispatch.plan_function`): the public function's own validation
runs up to the :class:`~trnsci.dispatch.Op` it dispatches, which is planned
instead of run -- the decision the call makes, by construction.

Planning a draw does not advance the generator: the call stops at its operation, before any
number is drawn.
"""

from __future__ import annotations

from trnsci.dispatch import Plan, plan_function

__all__ = ["plan"]


def plan(op_name: str, *args, **kwargs) -> Plan:
    """The backend and kernels a trnrand call would run, and why, without running it.

    Parameters
    ----------
    op_name : str
        The name of a public trnrand function (``"uniform"``, ``"normal"``, ``"gamma"``, ``"sobol"``, ...), with or
        without the ``"trnrand."`` prefix.
    *args, **kwargs
        That function's own arguments: the call is validated exactly as it
        would run, then planned instead of run (nothing is computed).

    Returns
    -------
    trnsci.dispatch.Plan
        ``op``, ``backend`` (``"torch"``, ``"nki"`` or ``"simulator"``),
        ``reason``, ``kernels`` (the kernels the call launches, each named
        once), the size against the threshold, and the closed-form kernel
        figures where they exist. A function that dispatches no operation
        plans as ``op=None`` on ``"torch"``.

    Raises
    ------
    ValueError
        ``op_name`` names no public trnrand function that computes (settings
        such as ``set_backend`` are not planned); or as the function itself.
    TypeError
        As the function itself.

    Examples
    --------
    >>> import trnrand
    >>> with trnrand.use_backend("simulator"):
    ...     p = trnrand.plan("normal", 1000)
    >>> p.op, p.backend, p.kernels
    ('trnrand.normal', 'simulator', ('normal_kernel',))
    """
    return plan_function("trnrand", op_name, *args, **kwargs)
