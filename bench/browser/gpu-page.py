#!/usr/bin/env python3
"""The page and the table of scripts/browser-gpu-bench.sh, on python3's standard library alone
(a GPU machine without Node or a registry runs it).

  gpu-page.py page --root DIR --config CFG.json --out RESULT.json [--chromium BIN] [--swiftshader]
      Serves DIR (the repository, or a device bundle laid out like it) on 127.0.0.1, cross-origin
      isolated (performance.now() ticks in 5 us there), with CFG at /__bench/config; starts headless
      Chromium on bench/browser/gpu-page.html, whose script posts its result (or its error) back;
      writes RESULT. Chromium's log goes beside RESULT (RESULT-chromium-FLAGS.log). WebGPU runs on the machine's Vulkan driver,
      or with --swiftshader on Chromium's SwiftShader (the flags of crates/gpu/webdriver.json).
      On the driver it tries two sets of flags in turn (GPU_FLAGS below): the next one when the
      page has not loaded the model within BENCH_START_TIMEOUT seconds (default 180) or failed
      before; BENCH_FLAGS=NAME takes one alone. Environment: CHROMIUM_FLAGS (more flags,
      space-separated), BENCH_TIMEOUT (seconds for the whole page, default 1800).

  gpu-page.py summary OUT
      Reads OUT/*/native-plain.json, native-suites/rows.json and page.json (one folder a model,
      with its meta.json) and writes OUT/summary.json and OUT/summary.md.
"""

import http.server
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

CLOSED_NETWORK = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# WebGPU on SwiftShader, as every browser test here runs it (crates/gpu/webdriver.json).
SWIFTSHADER = [
    "--headless=new",
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-vulkan=swiftshader",
    "--use-webgpu-adapter=swiftshader",
] + CLOSED_NETWORK
# WebGPU on the machine's own Vulkan driver, headless, no display, the GPU blocklist off (a
# server GPU under a VM is often on it). First Chromium's GPU process on Vulkan as well (Skia and
# ANGLE on Vulkan, no surface to present to); where that fails (it needs Vulkan features a CPU
# driver such as lavapipe lacks, and then loops on a lost context), Dawn alone on Vulkan with the
# rest of Chromium on its defaults.
GPU_FLAGS = [
    ("vulkan", [
        "--headless=new",
        "--no-sandbox",
        "--enable-unsafe-webgpu",
        "--enable-features=Vulkan",
        "--use-angle=vulkan",
        "--use-vulkan=native",
        "--disable-vulkan-surface",
        "--ignore-gpu-blocklist",
    ] + CLOSED_NETWORK),
    ("dawn", [
        "--headless=new",
        "--no-sandbox",
        "--enable-unsafe-webgpu",
        "--ignore-gpu-blocklist",
    ] + CLOSED_NETWORK),
]
# Chromium's log is kept to its first and last MiB (a lost GPU context logs thousands of lines a
# second).
LOG_KEEP = 1 << 20

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".md": "text/plain; charset=utf-8",
    ".wasm": "application/wasm",
    ".gguf": "application/octet-stream",
}


def page(args):
    swiftshader = "--swiftshader" in args
    rest = [a for a in args if a != "--swiftshader"]
    opts = dict(zip(rest[::2], rest[1::2]))
    root = os.path.abspath(opts["--root"])
    config = open(opts["--config"], "rb").read()
    out = opts["--out"]
    chromium = opts.get("--chromium", "/usr/bin/chromium")
    timeout = float(os.environ.get("BENCH_TIMEOUT", "1800"))
    done = threading.Event()
    loaded = threading.Event()
    result = {}

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

        def __init__(self, *a, **kw):
            super().__init__(*a, directory=root, **kw)

        def end_headers(self):
            if not self.path.startswith("/__bench/"):
                self.send_header("cross-origin-opener-policy", "same-origin")
                self.send_header("cross-origin-embedder-policy", "require-corp")
                self.send_header("cache-control", "no-cache")
            super().end_headers()

        def do_GET(self):
            if self.path == "/__bench/config":
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(config)))
                self.end_headers()
                self.wfile.write(config)
                return
            super().do_GET()

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(204)
            self.end_headers()
            what = self.path.removeprefix("/__bench/")
            try:
                msg = json.loads(body)
            except ValueError:
                msg = {"message": body.decode("utf-8", "replace")}
            if what == "log":
                print(f"  page: {msg.get('msg')}", file=sys.stderr, flush=True)
                if str(msg.get("msg")).startswith("loaded "):
                    loaded.set()
            elif what in ("result", "error") and not done.is_set():
                result[what] = msg
                done.set()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/bench/browser/gpu-page.html"
    if swiftshader:
        sets = [("swiftshader", SWIFTSHADER)]
    else:
        sets = [(n, f) for n, f in GPU_FLAGS if os.environ.get("BENCH_FLAGS", n) == n]
    if not sets:
        print(f"gpu-page.py: BENCH_FLAGS names none of {[n for n, _ in GPU_FLAGS]}", file=sys.stderr)
        return 2
    start_timeout = float(os.environ.get("BENCH_START_TIMEOUT", "180"))
    for i, (set_name, flags) in enumerate(sets):
        flags = flags + shlex.split(os.environ.get("CHROMIUM_FLAGS", ""))
        last = i == len(sets) - 1
        done.clear()
        loaded.clear()
        result.clear()
        log_path = f"{os.path.splitext(out)[0]}-chromium-{set_name}.log"
        print(f"gpu-page.py: Chromium with the {set_name} flags", file=sys.stderr, flush=True)
        run_chromium(chromium, flags, url, log_path, timeout, None if last else start_timeout, done, loaded, result)
        if "result" in result or loaded.is_set() or last:
            break
        print(f"gpu-page.py: {set_name} flags: {result['error'].get('message')}; next set", file=sys.stderr)
    server.shutdown()
    if "error" in result:
        print(f"gpu-page.py: the page failed: {result['error'].get('message')}", file=sys.stderr)
        return 1
    res = result["result"]
    res["flags"] = flags
    res["flag_set"] = set_name
    json.dump(res, open(out, "w"), indent=2)
    return 0


def run_chromium(chromium, flags, url, log_path, timeout, start_timeout, done, loaded, result):
    """One Chromium on the page until it posts a result or an error, exits, or runs out of time
    (start_timeout: until the model has loaded)."""
    profile = tempfile.mkdtemp(prefix="runahead-chromium-")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [chromium, *flags, f"--user-data-dir={profile}", url],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        start = time.monotonic()
        while not done.wait(1):
            elapsed = time.monotonic() - start
            if proc.poll() is not None:
                result["error"] = {"message": f"chromium exited with {proc.returncode} (see {log_path})"}
                break
            if start_timeout is not None and not loaded.is_set() and elapsed > start_timeout:
                result["error"] = {"message": f"no model loaded within {start_timeout:.0f} s (BENCH_START_TIMEOUT)"}
                break
            if elapsed > timeout:
                result["error"] = {"message": f"no result within {timeout:.0f} s (BENCH_TIMEOUT)"}
                break
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    subprocess.run(["rm", "-rf", profile], check=False)
    size = os.path.getsize(log_path)
    if size > 2 * LOG_KEEP:
        with open(log_path, "rb") as f:
            head = f.read(LOG_KEEP)
            f.seek(size - LOG_KEEP)
            tail = f.read()
        with open(log_path, "wb") as f:
            f.write(head + f"\n[... {size - 2 * LOG_KEEP} bytes left out ...]\n".encode() + tail)


def geomean(xs):
    xs = [x for x in xs if x and math.isfinite(x) and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def fmt(x, digits=2, suffix=""):
    return "—" if x is None else f"{x:.{digits}f}{suffix}"


def summary(out):
    models = []
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if not os.path.isfile(os.path.join(d, "meta.json")):
            continue
        load = lambda f: json.load(open(os.path.join(d, f))) if os.path.isfile(os.path.join(d, f)) else None
        meta, plain, page_res = load("meta.json"), load("native-plain.json"), load("page.json")
        suites = load("native-suites/rows.json") or []
        native_row = plain["rows"][0] if plain else None
        m = {"name": name, **meta, "native": None, "page": None}
        if native_row:
            host = {h["rows"]: h for h in native_row.get("host_cost", [])}
            m["native"] = {
                "device": native_row["device"],
                "tokens_per_second": native_row["tokens_per_second"],
                "host_cost": native_row.get("host_cost", []),
                "suites": suites,
                "grounded": {
                    drafter: geomean([r["speedup"] for r in suites if r["drafter"] == drafter])
                    for drafter in dict.fromkeys(r["drafter"] for r in suites)
                },
            }
            m["native"]["_host"] = host
        if page_res:
            p = {
                "adapter": page_res["adapter"],
                "backend": page_res["info"].get("backend"),
                "user_agent": page_res["userAgent"],
                "cross_origin_isolated": page_res["crossOriginIsolated"],
                "load_seconds": page_res["loadSeconds"],
                "tokens_per_second": page_res["plain"]["tokensPerSecond"],
                "host_cost": page_res["forwardCost"]["host_cost"],
                "suites": page_res["suites"],
                "grounded": {},
            }
            for drafter in meta["page_drafters"]:
                p["grounded"][drafter] = geomean(
                    [r["speedup"] for s in page_res["suites"] for r in s["rows"] if r["drafter"] == drafter])
            p["identical_text"] = all(r["identicalText"] for s in page_res["suites"] for r in s["rows"])
            m["page"] = p
        models.append(m)

    md = ["# The page on WebGPU next to the native CLI on the same GPU", ""]
    for m in models:
        n, p = m["native"], m["page"]
        pair = f" with draft `{m['draft']}`" if m.get("draft") else ""
        md += [f"## `{m['model']}`{pair}", ""]
        if p:
            a = p["adapter"]
            desc = " / ".join(x for x in (a.get("vendor"), a.get("architecture"), a.get("device"), a.get("description")) if x)
            md.append(f"Page: {p['user_agent']}, adapter {desc or 'none'} (backend {p['backend']}, "
                      f"crossOriginIsolated {p['cross_origin_isolated']}).")
            if a.get("software"):
                md += ["", "**The page's adapter is a CPU fallback (SwiftShader or similar), not the GPU: "
                       "its figures say nothing of the GPU.**"]
        else:
            md.append("Page: no result (see the log).")
        md += ["", f"Native: {n['device'] if n else 'no result'}.", ""]
        md += ["| | native | page | page / native |", "| --- | ---: | ---: | ---: |"]
        ratio = lambda x, y: None if x is None or y in (None, 0) else x / y
        nt = n["tokens_per_second"] if n else None
        pt = p["tokens_per_second"] if p else None
        md.append(f"| decode tok/s (plain, {m['plain_prompts']} prompts x {m['tokens']} tokens) | {fmt(nt)} | {fmt(pt)} | {fmt(ratio(pt, nt), 2, 'x')} |")
        for rows in (1, m["verify"]):
            nh = n["_host"].get(rows) if n else None
            ph = next((h for h in p["host_cost"] if h["rows"] == rows), None) if p else None
            for key, label in (("encode_submit_ms", "encode+submit ms"), ("wait_ms", "wait ms")):
                x, y = (nh or {}).get(key), (ph or {}).get(key)
                md.append(f"| host {label}, {rows} row{'s' if rows > 1 else ''} (median) | {fmt(x, 3)} | {fmt(y, 3)} | {fmt(ratio(y, x), 2, 'x')} |")
        for nd, pd in zip(m["native_drafters"], m["page_drafters"]):
            x = n["grounded"].get(nd) if n else None
            y = p["grounded"].get(pd) if p else None
            md.append(f"| grounded speedup, {pd} (geomean of {len(m['suites'])} suites) | {fmt(x, 2, 'x')} | {fmt(y, 2, 'x')} | |")
        md.append("")
        if p:
            md += ["| suite | drafter | page plain tok/s | page spec tok/s | page speedup | native speedup | page acceptance | same text |",
                   "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
            for s in p["suites"]:
                for r in s["rows"]:
                    nd = m["native_drafters"][m["page_drafters"].index(r["drafter"])]
                    nr = next((x for x in (n["suites"] if n else []) if x["suite"] == s["suite"] and x["drafter"] == nd), None)
                    md.append(f"| {s['suite']} ({s['prompts']}) | {r['drafter']} | {fmt(r['plainTps'])} | {fmt(r['specTps'])} "
                              f"| {fmt(r['speedup'], 2, 'x')} | {fmt(nr['speedup'] if nr else None, 2, 'x')} "
                              f"| {fmt(r['acceptance'])} | {'yes' if r['identicalText'] else '**no**'} |")
            md.append("")
    for m in models:
        if m["native"]:
            del m["native"]["_host"]
    software = [m["name"] for m in models if m["page"] and m["page"]["adapter"].get("software")]
    json.dump({"models": models, "software_adapter": software}, open(os.path.join(out, "summary.json"), "w"), indent=2)
    open(os.path.join(out, "summary.md"), "w").write("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "page":
        sys.exit(page(sys.argv[2:]))
    if len(sys.argv) == 3 and sys.argv[1] == "summary":
        sys.exit(summary(sys.argv[2]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
