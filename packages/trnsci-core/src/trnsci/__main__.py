"""``python -m trnsci``: the same as the ``trnsci`` console script."""

from trnsci.cli import main

raise SystemExit(main())
