#!/usr/bin/env bash
# Serves the demo page (www/) and the npm package (pkg/) from the repository root, building the
# package's wasm first when it is missing or older than the Rust sources.
#
#   scripts/demo.sh [PORT]     # default 8000; DEMO_BIND=0.0.0.0 to serve beyond this machine
#
# WebGPU needs a secure context: http://localhost is one, a plain-http LAN address is not.
# Every response carries Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy:
# require-corp, which make the page cross-origin isolated: there the CPU engine runs on several
# threads (the threaded wasm, pkg/wasm-threads/). DEMO_ISOLATE=0 leaves them out (one thread).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

port=${1:-8000}
bind=${DEMO_BIND:-127.0.0.1}
isolate=${DEMO_ISOLATE:-1}

stale() { [ ! -f "$1" ] || [ -n "$(find crates shaders Cargo.toml Cargo.lock -newer "$1" -print -quit)" ]; }
if stale pkg/wasm/runahead_bg.wasm; then "$root/scripts/wasm.sh" pkg; fi
if [ "$isolate" = 1 ] && stale pkg/wasm-threads/runahead_bg.wasm; then "$root/scripts/wasm.sh" pkg-threads; fi

echo "demo: open http://localhost:$port/www/"
echo "demo: the URL field's default loads models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-models.sh)"
[ "$isolate" = 1 ] && echo "demo: cross-origin isolated (COOP/COEP): the CPU engine may run several threads"
DEMO_ISOLATE=$isolate exec python3 - "$port" "$bind" "$root" <<'EOF'
import functools, http.server, os, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        if os.environ.get("DEMO_ISOLATE") == "1":
            self.send_header("Cross-Origin-Opener-Policy", "same-origin")
            self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        super().end_headers()

port, bind, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
handler = functools.partial(Handler, directory=root)
http.server.ThreadingHTTPServer((bind, port), handler).serve_forever()
EOF
