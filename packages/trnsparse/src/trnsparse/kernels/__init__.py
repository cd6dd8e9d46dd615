"""NKI kernels of trnsparse (one per file); lowerings in :mod:`trnsparse._nki`."""
