#!/usr/bin/env python3
"""Progress in a real terminal: `tessera sweep` runs in a detached tmux pane and the pane
shows the rewritten bar with its ETA; the same sweep with stderr on a pipe prints plain
"progress:" lines (no carriage returns, no bar).

usage: /usr/bin/python3 tests/launcher/test_progress_tmux.py TESSERA_BINARY
Exits 77 (ctest's SKIP_RETURN_CODE) when tmux is not installed."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from timescale import scaled  # noqa: E402


def sweep(binary, out):
    return (f"{binary} sweep --policies max_min_fairness,max_min_fairness_perf --rates 5,6 "
            f"--seeds 1,2 --jobs 1200 --out {out} -j 1 --progress-interval 0.2")


def main():
    if not shutil.which("tmux"):
        print("skipped: no tmux on PATH (apt-get install tmux): the test needs a real terminal")
        return 77
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        session = f"tessera-progress-{os.getpid()}"
        seen = ""
        try:
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "150", "-y", "10",
                            sweep(binary, f"{d}/tty") + "; sleep 30"], check=True)
            deadline = time.time() + scaled(40)
            while time.time() < deadline:
                seen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session],
                                      stdout=subprocess.PIPE, text=True).stdout
                if re.search(r"\[#+\.*\] \d+% \d/8 cells, elapsed \S+, ETA \S+", seen):
                    break
                time.sleep(0.1)
        finally:
            subprocess.run(["tmux", "kill-session", "-t", session], stderr=subprocess.DEVNULL)
        assert re.search(r"\[#+\.*\] \d+% \d/8 cells, elapsed \S+, ETA \S+", seen), seen
        assert "progress:" not in seen, seen
        r = subprocess.run(sweep(binary, f"{d}/pipe"), shell=True, stderr=subprocess.PIPE,
                           text=True, check=True)
        lines = [x for x in r.stderr.splitlines() if x.startswith("progress: ")]
        assert len(lines) >= 2 and "\r" not in r.stderr and "[#" not in r.stderr, r.stderr
        assert all("ETA" in x for x in lines), lines
    print("terminal: bar with ETA; pipe: plain progress lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
