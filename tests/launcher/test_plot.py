#!/usr/bin/env python3
"""`tessera plot`: every kind writes a non-empty PNG and SVG from tiny sweeps' CSVs (rates,
and given traces), per-job CSVs and a simulation's timeline; bad input exits 2. The kinds are drawn in this
process (scripts/plot.py imported: matplotlib loads once), the CLI is run once.

usage: /usr/bin/python3 tests/launcher/test_plot.py TESSERA_BINARY
Exits 77 (ctest's SKIP_RETURN_CODE) when matplotlib is not installed."""

import contextlib
import io
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))


def check_outputs(prefix):
    for ext in ("png", "svg"):
        path = f"{prefix}.{ext}"
        assert os.path.isfile(path) and os.path.getsize(path) > 1000, path


def check_policy_panels(plot):
    """The policies kind's order and axis: hand-made panels with known means."""
    from sweep_table import finished_first  # the order plot.py and sweep_table.py share
    means = {"a": 2.0, "b": 0.5, "capped": 0.1, "c": 40.0}
    # capped: a cell stopped at the cap, so it goes after the finished ones
    assert finished_first(means, {"capped"}) == ["b", "a", "c", "capped"]
    assert finished_first(means, set()) == ["capped", "b", "a", "c"]
    assert plot.use_log([0.5, 2.0, 40.0], 0.5, "auto") is True     # 80x > LOG_SPAN
    assert plot.use_log([0.5, 2.0, 14.0], 0.5, "auto") is False    # 28x
    assert plot.use_log([1.0, 2.0, 400.0], 0.0, "auto") is False   # a zero value: linear
    assert plot.use_log([1.0, 1.0], 1.0, "log") is True
    assert plot.use_log([1.0, 400.0], 1.0, "linear") is False
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/s.csv", "w").write("policy,trace,avg_jct_h,complete\n"
                                      "fifo,x-1,0,true\nfifo,x-2,2,true\n")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert plot.main(["policies", f"{d}/s.csv", "--out", f"{d}/p", "--scale", "log"]) == 2
            assert plot.main(["policies", f"{d}/s.csv", "--out", f"{d}/q"]) == 0
            # means 1 and 400 span 400x, but a zero value keeps auto on a linear axis
            open(f"{d}/z.csv", "w").write("policy,trace,avg_jct_h,complete\n"
                                          "fifo,x-1,0,true\nfifo,x-2,2,true\n"
                                          "hare,x-1,400,true\nhare,x-2,400,true\n")
            assert plot.main(["policies", f"{d}/z.csv", "--out", f"{d}/z"]) == 0
        assert "set 'x' has a value <= 0" in err.getvalue(), err.getvalue()


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skipped: python3-matplotlib is not installed")
        return 77
    import plot
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([binary, "sweep", "--policies", "fifo,max_min_fairness_perf", "--rates",
                        "4,8", "--seeds", "1,2", "--jobs", "30", "--out", f"{d}/sw", "-q",
                        "--keep-jobs"], check=True)
        trace = f"{d}/sw/traces/r8_s1.trace"
        subprocess.run([binary, "simulate", "-q", "--trace", trace, "--timeline", f"{d}/tl.jsonl",
                        "--cluster-spec", "4 v100 : 4 k80, 2 per server",
                        "--round-length", "3600"], check=True, stdout=subprocess.DEVNULL)
        jobs = [f"{d}/sw/cells/{p}_r8_s1_L360.jobs.csv" for p in ("fifo", "max_min_fairness_perf")]
        for n in (1, 2):  # two traces of one set, for the policies kind
            os.link(f"{d}/sw/traces/r8_s{n}.trace", f"{d}/set-{n}.trace")
        subprocess.run([binary, "sweep", "--policies", "fifo,max_min_fairness_perf", "--traces",
                        f"{d}/set-1.trace", f"{d}/set-2.trace", "--out", f"{d}/tr", "-q"],
                       check=True)
        cases = {"jct-rate": [f"{d}/sw/sweep.csv"], "cdf": jobs, "policies": [f"{d}/tr/sweep.csv"],
                 "utilisation": [f"{d}/tl.jsonl"], "gantt": [f"{d}/tl.jsonl", f"{d}/tl.jsonl"]}
        for kind, inputs in cases.items():
            with contextlib.redirect_stdout(io.StringIO()):
                assert plot.main([kind, *inputs, "--out", f"{d}/{kind}"]) == 0, kind
            check_outputs(f"{d}/{kind}")
        r = subprocess.run([binary, "plot", "gantt", f"{d}/tl.jsonl", "--out", f"{d}/cli",
                            "--format", "png,svg"], stdout=subprocess.PIPE, text=True)
        assert r.returncode == 0, r.stdout
        check_outputs(f"{d}/cli")
        open(f"{d}/old.csv", "w").write("policy,avg_jct_h\nfifo,1\n")  # no trace column
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert plot.main(["policies", f"{d}/old.csv", "--out", f"{d}/p"]) == 2
        assert "old.csv:2: field 'trace'" in err.getvalue(), err.getvalue()
        open(f"{d}/bad.jsonl", "w").write('{"timeline":1,"servers":[],"types":[]}\n{"x":1}\n')
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert plot.main(["gantt", f"{d}/bad.jsonl", "--out", f"{d}/bad"]) == 2
        assert "bad.jsonl:2" in err.getvalue(), err.getvalue()
    check_policy_panels(plot)
    print("jct-rate, cdf, policies, utilisation, gantt: PNG and SVG written; bad input refused;"
          " policies ordered finished-first, log axis chosen by span")
    return 0


if __name__ == "__main__":
    sys.exit(main())
