"""``python -m trnsci.coverage``: ``--help`` describes the command and a mistyped option is a usage error
(both used to print the whole table and exit 0)."""

import pytest

from trnsci import coverage


def test_help_and_typo(capsys):
    with pytest.raises(SystemExit) as exc:
        coverage.main(["--help"])
    assert exc.value.code == 0 and "--write" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        coverage.main(["--wirte"])
    assert exc.value.code == 2 and "unrecognized arguments: --wirte" in capsys.readouterr().err
