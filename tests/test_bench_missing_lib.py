"""``trnsci bench --lib X`` with X not installed names X and what to install, instead of claiming that
no installed library ships any case."""

from trnsci import bench, plugins


def test_bench_lib_not_installed_is_named(monkeypatch, capsys):
    real = plugins.declared
    monkeypatch.setattr(plugins, "declared",
                        lambda g: [ep for ep in real(g) if ep.name != "trnfft"] if g == bench.ENTRY_POINT_GROUP
                        else real(g))
    assert bench.main(["--lib", "trnfft", "--quick", "--no-kernels", "--no-accuracy"]) == 1
    err = capsys.readouterr().err
    assert "--lib trnfft: not installed" in err and "pip install trnfft --find-links WHEELHOUSE" in err, err
    assert "no benchmark cases found for --lib trnfft" in err and "no installed library" not in err, err
