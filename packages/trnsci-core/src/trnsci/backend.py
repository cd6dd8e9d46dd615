"""Which implementation of an operation runs: the backend setting.

A backend name is one of

``"auto"``
    NKI kernels where a NeuronCore is present and the operation is large
    enough to pay for a dispatch (see :mod:`trnsci.dispatch`), else torch.
``"torch"`` (alias ``"pytorch"``)
    the torch fallback, on whatever device the inputs live on.
``"nki"``
    NKI kernels on a NeuronCore. Asking for it on a machine without one is a
    ``RuntimeError`` at the first operation, never a silent fallback.
``"simulator"``
    the NKI kernel source run on the CPU: through AWS's ``nki.simulate``
    when that package is installed, else through trnsci's own emulator.

Scopes, strongest first::

    with trnsci.use_backend("torch"):        # a block (optionally one library)
    trnblas.set_backend("simulator")         # one library
    trnsci.set_backend("torch")              # the whole suite
    TRNBLAS_BACKEND=torch                    # environment, one library
    TRNSCI_BACKEND=torch                     # environment, the suite
    "auto"                                   # default

Settings made through the API live in :mod:`contextvars`: a thread or an
asyncio task sees the settings of its own context only, so a setting made in
one thread never leaks into another (a new thread starts from the
environment and the default).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from trnsci import _env

BACKENDS = ("auto", "torch", "nki", "simulator")
ALIASES = {"pytorch": "torch"}
LIBRARIES = ("trnblas", "trnfft", "trnsparse", "trnsolver", "trnrand", "trntensor")

# One variable per scope. A library's variable holds that library's setting;
# the ``None`` key holds the suite-wide one. Blocks (``use_backend``) keep a
# separate stack so that they beat API settings made before or inside them.
_api: dict[str | None, contextvars.ContextVar[str | None]] = {
    key: contextvars.ContextVar(f"trnsci_backend_{key or 'suite'}", default=None)
    for key in (None, *LIBRARIES)
}
_block: dict[str | None, contextvars.ContextVar[str | None]] = {
    key: contextvars.ContextVar(f"trnsci_block_{key or 'suite'}", default=None)
    for key in (None, *LIBRARIES)
}

# Set to True in a context the first time set_backend or use_backend runs there, and never
# reset: while it is unset, every variable above is unset too, so the per-call probe
# (trnsci.dispatch.torch_probe) can skip reading them one by one.
_touched: contextvars.ContextVar[bool | None] = contextvars.ContextVar("trnsci_backend_touched", default=None)


@dataclass(frozen=True)
class Setting:
    """The effective backend name for a library and where it came from.

    ``origin`` is ``"with"``, ``"api"``, ``"env:<VARIABLE>"`` or ``"default"``.
    """

    name: str
    origin: str


def normalize(name: object, *, source: str = "backend") -> str:
    """Return the canonical backend name, or raise ``ValueError``.

    ``source`` names what supplied the value (an argument or an environment
    variable) so that the message points at the culprit.
    """
    if not isinstance(name, str):
        raise TypeError(f"{source} must be a str naming a backend, got {type(name).__name__}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in BACKENDS:
        valid = ", ".join(repr(b) for b in (*BACKENDS, *ALIASES))
        raise ValueError(f"Unknown backend {name!r} in {source}; valid names are {valid}")
    return key


def _check_library(library: str | None, where: str = "") -> str | None:
    at = f"{where}: " if where else ""
    if library is not None and not isinstance(library, str):
        raise TypeError(f"{at}library must be one of {', '.join(LIBRARIES)} or None, got {type(library).__name__}")
    if library is not None and library not in LIBRARIES:
        raise ValueError(f"{at}library must be one of {', '.join(LIBRARIES)} or None, got {library!r}")
    return library


def env_var(library: str | None) -> str:
    """The environment variable that sets ``library``'s backend (suite if None)."""
    return f"{(library or 'trnsci').upper()}_BACKEND"


def set_backend(name: str, library: str | None = None) -> None:
    """Set the backend for the suite, or for one library, in this context.

    Parameters
    ----------
    name : {"auto", "torch", "pytorch", "nki", "simulator"}
    library : str, optional
        One of the six library names; ``None`` (default) sets the suite-wide
        backend. A library setting beats the suite setting.

    Raises
    ------
    ValueError
        If ``name`` or ``library`` is unknown.
    """
    _api[_check_library(library, "set_backend")].set(normalize(name, source="set_backend(name=...)"))
    _touched.set(True)


def reset_backend(library: str | None = None) -> None:
    """Forget the API setting for the suite or a library (env and default apply again)."""
    _api[_check_library(library, "reset_backend")].set(None)


@contextlib.contextmanager
def use_backend(name: str, library: str | None = None) -> Iterator[str]:
    """Run a block with a backend; the previous setting returns on exit, even on error.

    A block beats library and suite settings made with :func:`set_backend`.
    With ``library`` given, only that library is affected. Blocks of the same
    scope nest (the innermost wins); a library block beats a suite block
    wherever it stands.
    """
    var = _block[_check_library(library, "use_backend")]
    token = var.set(normalize(name, source="use_backend(name=...)"))
    _touched.set(True)
    try:
        yield var.get()
    finally:
        var.reset(token)


# Per scope, in precedence order: the context variables and environment
# variables to consult. Precomputed because resolve() runs on every call.
_chain = {
    key: (
        tuple(_block[k] for k in ((key, None) if key else (None,))),
        tuple(_api[k] for k in ((key, None) if key else (None,))),
        _env.reader(tuple(env_var(k) for k in ((key, None) if key else (None,)))),
    )
    for key in (None, *LIBRARIES)
}
_settings: dict[tuple[str, str], Setting] = {}


def scope(library: str | None) -> tuple[tuple[contextvars.ContextVar, ...], tuple[str, ...]]:
    """What can set ``library``'s backend: its context variables (blocks, then API settings)
    and environment variable names, each in precedence order.

    :func:`resolve` consults exactly these; when none holds a value the
    answer is the default, ``"auto"``. The per-call check of
    :meth:`trnsci.dispatch.Op.on_torch` probes them directly.
    """
    _check_library(library)
    keys = (library, None) if library else (None,)
    return (tuple(_block[k] for k in keys) + tuple(_api[k] for k in keys), tuple(env_var(k) for k in keys))


def touched() -> contextvars.ContextVar[bool | None]:
    """The context variable that is unset while no backend was ever set in this context
    (no :func:`set_backend` or :func:`use_backend` ran here) and no
    :func:`~trnsci.dispatch.plan_call` is collecting: then :func:`scope`'s variables are all
    unset and calls run."""
    return _touched


def _setting(name: str, origin: str) -> Setting:
    s = _settings.get((name, origin))
    if s is None:
        s = _settings[(name, origin)] = Setting(name, origin)
    return s


_default = _setting("auto", "default")


def resolve(library: str | None = None) -> Setting:
    """The effective backend name for ``library`` (or the suite) and its origin."""
    try:
        blocks, apis, envs = _chain[library]
    except KeyError:
        _check_library(library)
        raise
    for var in blocks:
        value = var.get()
        if value is not None:
            return _setting(value, "with")
    for var in apis:
        value = var.get()
        if value is not None:
            return _setting(value, "api")
    found = envs()
    if found is not None:
        name, raw = found
        return _setting(normalize(raw, source=f"environment variable {name}"), f"env:{name}")
    return _default


def get_backend(library: str | None = None) -> str:
    """The effective backend name for ``library`` (or the suite), e.g. ``"auto"``."""
    if library is not None:
        _check_library(library, "get_backend")
    return resolve(library).name


# ---- names as reported: equal to the published packages' spelling too
#
# The published packages called the torch fallback "pytorch"; the suite calls it "torch" (and accepts
# "pytorch" when setting a backend). What the suite reports -- each library's get_backend(), trntensor's plan and step
# backends -- is a BackendName: a str equal to its own value and to the published alias, so code written
# against the published packages (plan.backend == "pytorch") keeps its meaning. It prints, hashes and
# serializes as the suite's name.

#: The suite's names -> the published packages' name for the same kind of route. The published
#: "pytorch" meant "the host fallback, not an NKI kernel": trntensor's autotuner may put a CPU GEMM
#: step on numpy.matmul, which is that too; a plan's "+"-joined names qualify when every part does.
PUBLISHED = {"torch": "pytorch", "numpy": "pytorch"}


def published_name(name: str) -> str | None:
    """The published packages' name for the route ``name`` (``"torch"`` -> ``"pytorch"``; a ``"+"``-joined
    name when all its parts agree), or None when they had none (``"nki"``, ``"simulator+torch"``)."""
    parts = {PUBLISHED.get(p) for p in name.split("+")}
    return parts.pop() if len(parts) == 1 else None


class BackendName(str):
    """A backend name that compares equal to the published alias as well (``"torch" == "pytorch"``).

    Examples
    --------
    >>> from trnsci.backend import BackendName
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
            return str.__eq__(mine, other) or (published_name(mine) or "") == str(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return repr(str.__str__(self))


def bind(library: str):
    """Return ``(set_backend, get_backend, use_backend)`` bound to one library.

    Each library re-exports these so that ``trnblas.set_backend("torch")``
    affects trnblas only.
    """
    _check_library(library)

    def set_backend_(name: str) -> None:
        set_backend(name, library)

    def get_backend_() -> str:
        return BackendName(get_backend(library))  # "torch" also equals the published "pytorch"

    def use_backend_(name: str):
        return use_backend(name, library)

    for fn, verb in ((set_backend_, "Set"), (get_backend_, "Get"), (use_backend_, "Use")):
        fn.__name__ = fn.__qualname__ = fn.__name__.rstrip("_")
        fn.__doc__ = f"{verb} the backend of {library} only; see :mod:`trnsci.backend`."
    return set_backend_, get_backend_, use_backend_
