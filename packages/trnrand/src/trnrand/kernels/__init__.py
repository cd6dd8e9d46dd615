"""trnrand's NKI kernels (NKI 0.6, ``nisa`` with ``dst``): Philox4x32-10, Box-Muller, Gray-code Sobol'."""
