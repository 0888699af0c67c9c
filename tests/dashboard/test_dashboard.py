#!/usr/bin/env python3
"""The dashboard (runtime/service/http/dashboard.html) in headless Chromium against fake_api.FakeApi:
the DOM Chromium renders after 5 s of virtual time is read back (--dump-dom) and checked
against the canned API answers.

usage: /usr/bin/python3 tests/dashboard/test_dashboard.py [--screenshot PATH] [unittest args]
(or TESSERA_DASHBOARD_SCREENSHOT=PATH). Exits 77 (ctest's SKIP_RETURN_CODE) when no Chromium
is installed (apt-get install chromium)."""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from timescale import scaled  # noqa: E402

import fake_api  # noqa: E402
from fake_api import FakeApi  # noqa: E402

TOKEN = "7e" * 32
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = os.environ.get("TESSERA_DASHBOARD_SCREENSHOT")
# Chromium's own traffic (updates, sync, autofill, time) turned off, so that what reaches the
# proxy comes from the page.
QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--no-first-run", "--disable-client-side-phishing-detection",
         "--disable-extensions", "--disable-component-extensions-with-background-pages",
         "--disable-domain-reliability", "--no-pings", "--disable-breakpad",
         "--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,"
         "Translate,NetworkTimeServiceQuerying,CertificateTransparencyComponentUpdater"]
# What Chromium still connects to with the flags above, for an empty page as for any other:
# its own services, never a page's.
BROWSER_OWN = {("CONNECT", "update.googleapis.com:443"), ("CONNECT", "accounts.google.com:443")}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Dom(HTMLParser):
    """The elements of a page, each as {"tag", "attrs", "ancestors" (their attrs), "text"}."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.elements, self._open = [], []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        el = {"tag": tag, "attrs": dict(attrs), "text": "",
              "ancestors": [e["attrs"] for e in self._open]}
        self.elements.append(el)
        if tag not in VOID:
            self._open.append(el)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self._open.pop()

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i]["tag"] == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        for el in self._open:
            el["text"] += data

    def find(self, **attrs):
        """Elements whose attributes include `attrs` (data_x means data-x; None: present)."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.elements
                if all(k in e["attrs"] and (v is None or e["attrs"][k] == str(v))
                       for k, v in want.items())]

    def by_id(self, id_):
        found = self.find(id=id_)
        assert len(found) == 1, f"{len(found)} elements with id {id_}"
        return found[0]


def chromium(url, api, out_dir, *extra):
    """Runs headless Chromium on `url`; every request for another host goes to `api` as its
    proxy (recorded in api.external). Returns stdout (the DOM with --dump-dom)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           *QUIET,
           "--virtual-time-budget=5000", f"--user-data-dir={out_dir}/profile",
           f"--proxy-server=http://127.0.0.1:{api.port}", "--window-size=1280,900", *extra, url]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=scaled(90))
    if r.returncode != 0:
        raise AssertionError(f"chromium exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


class DashboardTest(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.api = None

    def tearDown(self):
        if self.api is not None:
            self.api.stop()
        self._dir.cleanup()

    def load(self, fragment=f"#token={TOKEN}", **api_args):
        self.api = FakeApi(TOKEN, **api_args).start()
        url = f"http://127.0.0.1:{self.api.port}/{fragment}"
        return Dom(chromium(url, self.api, self._dir.name, "--dump-dom"))

    def api_paths(self, path):
        return [p for m, p, _ in self.api.requests if p.split("?")[0] == path]

    def check_only_own_api(self):
        self.assertEqual([r for r in self.api.external if r not in BROWSER_OWN], [],
                         "requests for other hosts")
        for method, path, auth in self.api.requests:
            self.assertEqual(method, "GET")
            self.assertTrue(path == "/" or path.startswith("/v1/"), path)

    def test_renders_header_jobs_nodes_and_timeline(self):
        dom = self.load()
        self.assertEqual(dom.by_id("status")["attrs"]["data-status"], "ok")
        self.assertIn("hidden", dom.by_id("auth")["attrs"])
        cluster = fake_api.cluster(fake_api.JOBS)
        self.assertIn(cluster["policy"], dom.by_id("policy")["text"])
        self.assertIn(str(cluster["round"]), dom.by_id("round")["text"])
        self.assertIn("2/3", dom.by_id("nodes-alive")["text"])
        shown = {e["attrs"]["data-state"]: int(e["attrs"]["data-count"])
                 for e in dom.find(data_count=None)}
        self.assertEqual(shown, cluster["jobs"])
        # Every job has its row with its state, the running ones among them.
        rows = {int(e["attrs"]["data-job-id"]): e for e in dom.find(data_job_id=None)
                if e["tag"] == "tr"}
        self.assertEqual({i: r["attrs"]["data-state"] for i, r in rows.items()},
                         {j["id"]: j["state"] for j in fake_api.JOBS})
        running = [i for i, r in rows.items() if r["attrs"]["data-state"] == "running"]
        self.assertEqual(sorted(running), [0, 2])
        self.assertIn("s1 x2, s2 x2 (copy 1)", rows[2]["text"])
        # Every node has its timeline row; the lost one says so.
        ranks = {int(e["attrs"]["data-node-rank"]): e["attrs"]
                 for e in dom.find(data_node_rank=None)}
        self.assertEqual(sorted(ranks), [n[0] for n in fake_api.NODES])
        self.assertEqual({r: a["data-node-state"] for r, a in ranks.items()},
                         {n[0]: n[5] for n in fake_api.NODES})
        self.assertEqual(ranks[3].get("class"), "gone")
        # Each cell of the timeline is a part some round assigned, and every part has its cell.
        cells = {(int(e["ancestors"][-1]["data-node-rank"]), int(e["attrs"]["data-round"]),
                  int(e["attrs"]["data-job-id"])) for e in dom.find(data_round=None)}
        want = {(a["rank"], r["round"], a["job"])
                for r in fake_api.rounds() for a in r["assignments"]}
        self.assertEqual(cells, want)
        self.check_only_own_api()

    def test_the_job_table_shows_a_page_and_follows_the_fragment(self):
        def rows(dom):
            return [int(e["attrs"]["data-job-id"]) for e in dom.find(data_job_id=None)
                    if e["tag"] == "tr"]
        # 5 canned jobs and 245 queued ones: the first page holds ids 0-99, "next" leads on.
        dom = self.load(extra_jobs=245)
        self.assertEqual(rows(dom), list(range(100)))
        self.assertEqual(dom.by_id("job-next")["attrs"]["data-next"], "99")
        self.assertNotIn("disabled", dom.by_id("job-next")["attrs"])
        self.assertIn("disabled", dom.by_id("job-first")["attrs"])
        self.assertIn("ids 0-99", dom.by_id("job-page")["text"])
        self.assertIn("/v1/jobs?limit=100", self.api_paths("/v1/jobs"))
        self.api.stop()
        # The last page, by the fragment a "next page" click sets.
        dom = self.load(f"#token={TOKEN}&after=199", extra_jobs=245)
        self.assertEqual(rows(dom), list(range(200, 250)))
        self.assertIn("disabled", dom.by_id("job-next")["attrs"])
        self.assertNotIn("disabled", dom.by_id("job-first")["attrs"])
        self.api.stop()
        # A state filter pages the jobs of that state only.
        dom = self.load(f"#token={TOKEN}&state=running", extra_jobs=245)
        self.assertEqual(rows(dom), [0, 2])
        self.assertIn("/v1/jobs?limit=100&state=running", self.api_paths("/v1/jobs"))
        self.check_only_own_api()

    def test_progress_bars_match_steps_over_total(self):
        dom = self.load()
        for j in fake_api.JOBS:
            row = [e for e in dom.find(data_job_id=j["id"]) if e["tag"] == "tr"][0]
            bar = [e for e in dom.find(data_progress=None)
                   if e["ancestors"] and row["attrs"] in e["ancestors"]]
            self.assertEqual(len(bar), 1, j["id"])
            fill = [e for e in dom.elements if bar[0]["attrs"] in e["ancestors"]]
            width = float(re.fullmatch(r"width:\s*([0-9.]+)%;?", fill[0]["attrs"]["style"])[1])
            want = j["steps"] / j["total_steps"]
            self.assertAlmostEqual(float(bar[0]["attrs"]["data-progress"]), want, places=3)
            self.assertAlmostEqual(width, 100 * want, places=1)
            self.assertIn(f"{int(100 * want)}%", row["text"])

    def test_utilisation_per_round_and_per_type(self):
        dom = self.load()
        values = dom.by_id("util-line")["attrs"]["data-values"].split(",")
        want = [r["busy_gpus"] / (r["busy_gpus"] + r["idle_gpus"]) for r in fake_api.rounds()]
        self.assertEqual(len(values), len(want))
        for got, w in zip(values, want):
            self.assertAlmostEqual(float(got), w, places=3)
        self.assertEqual(len(dom.by_id("util-line")["attrs"]["points"].split()), len(want))
        per_type = {e["attrs"]["data-gpu-type"]: float(e["attrs"]["data-util"])
                    for e in dom.find(data_util=None)}
        self.assertEqual(per_type, fake_api.cluster(fake_api.JOBS)["utilisation"])

    def test_polls_every_second_with_the_bearer_token(self):
        self.load()
        for path in ("/v1/cluster", "/v1/jobs", "/v1/nodes", "/v1/rounds"):
            # 5 s of virtual time at one poll a second: at least 4 polls of each resource.
            self.assertGreaterEqual(len(self.api_paths(path)), 4, path)
        self.assertIn("/v1/rounds?limit=60", self.api_paths("/v1/rounds"))
        for _, path, auth in self.api.requests:
            if path.startswith("/v1/"):
                self.assertEqual(auth, f"Bearer {TOKEN}")
        self.check_only_own_api()

    def test_wrong_token_shows_the_auth_message_and_stops_polling(self):
        dom = self.load("#token=" + "00" * 32)
        auth = dom.by_id("auth")
        self.assertNotIn("hidden", auth["attrs"])
        self.assertEqual(auth["attrs"]["data-reason"], "refused")
        self.assertIn("refused this token (401)", dom.by_id("auth-message")["text"])
        self.assertEqual(dom.by_id("status")["attrs"]["data-status"], "auth")
        self.assertEqual(len(self.api_paths("/v1/cluster")), 1)
        self.assertEqual(dom.find(data_job_id=None), [])

    def test_malformed_fragment_is_a_refused_token_not_a_dead_page(self):
        dom = self.load("#token=%E0%A4%A")  # not valid percent-encoding
        self.assertEqual(dom.by_id("auth")["attrs"]["data-reason"], "refused")
        self.assertEqual(self.api_paths("/v1/cluster")[:1], ["/v1/cluster"])

    def test_no_token_asks_for_one_and_calls_nothing(self):
        dom = self.load("")
        self.assertEqual(dom.by_id("auth")["attrs"]["data-reason"], "missing")
        self.assertIn("No token", dom.by_id("auth-message")["text"])
        self.assertTrue(dom.find(id="token-input"))
        self.assertEqual([p for _, p, _ in self.api.requests if p.startswith("/v1/")], [])

    def test_server_gone_shows_disconnected_and_keeps_the_last_data(self):
        dom = self.load(gone_after=4)  # the first poll's four answers, then nothing
        status = dom.by_id("status")
        self.assertEqual(status["attrs"]["data-status"], "disconnected")
        self.assertEqual(status["text"], "disconnected, retrying")
        self.assertEqual(len([e for e in dom.find(data_job_id=None) if e["tag"] == "tr"]), 5)
        self.assertGreaterEqual(len(self.api_paths("/v1/cluster")), 3, "it retries")

    def test_missing_fields_and_markup_in_strings(self):
        dom = self.load(job_overrides={
            2: {"total_steps": None, "steps_per_second": None, "loss": None, "state": None},
            4: {"kind": '<b id="injected">x</b><img src=x>'}})
        self.assertEqual(dom.by_id("status")["attrs"]["data-status"], "ok")
        row2 = [e for e in dom.find(data_job_id=2) if e["tag"] == "tr"][0]
        self.assertIn("-", row2["text"])
        self.assertEqual(float(dom.find(data_progress=None)[2]["attrs"]["data-progress"]), 0)
        self.assertEqual(dom.find(id="injected"), [])
        self.assertEqual([e for e in dom.elements if e["tag"] == "img"], [])
        row4 = [e for e in dom.find(data_job_id=4) if e["tag"] == "tr"][0]
        self.assertIn('<b id="injected">x</b>', row4["text"])

    def test_proxy_sees_a_page_that_loads_from_other_hosts(self):
        # The control for check_only_own_api: a page with a CDN script and image is caught.
        page = (b'<!DOCTYPE html><img src="http://cdn.example.com/a.png">'
                b'<script src="https://cdn.example.net/b.js"></script>')
        self.load(page=page)
        self.assertIn(("GET", "http://cdn.example.com/a.png"), self.api.external)
        self.assertIn(("CONNECT", "cdn.example.net:443"), self.api.external)

    def test_screenshot(self):
        path = SCREENSHOT or os.path.join(self._dir.name, "dashboard.png")
        self.api = FakeApi(TOKEN).start()
        chromium(f"http://127.0.0.1:{self.api.port}/#token={TOKEN}", self.api, self._dir.name,
                 f"--screenshot={os.path.abspath(path)}")
        with open(path, "rb") as f:
            png = f.read()
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(png), 10000)  # a blank page is ~5 KB


def main():
    global SCREENSHOT
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--screenshot")
    args, rest = p.parse_known_args()
    if args.screenshot:
        SCREENSHOT = args.screenshot
    if CHROMIUM is None:
        print("SKIP: no chromium on PATH (apt-get install chromium, scripts/install-deps.sh)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
