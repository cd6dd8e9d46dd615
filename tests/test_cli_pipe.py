"""``trnsci info | head -1`` ends quietly: no BrokenPipeError traceback when the reader leaves early."""

import os
import subprocess
import sys


def test_info_into_a_closed_pipe_is_quiet():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with subprocess.Popen([sys.executable, "-m", "trnsci", "info"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env) as p:
        p.stdout.close()  # the reader is gone before the report is written (imports take ~1 s)
        err = p.stderr.read().decode()
        rc = p.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert rc == 141, (rc, err)
