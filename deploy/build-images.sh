#!/usr/bin/env bash
# Builds the six images of deploy/docker/ from the repository, tagged openclaw-rl/<role>:<version> (pyproject's).
#
#   deploy/build-images.sh                  docker (or podman), from the public base images
#   deploy/build-images.sh --offline-base   a machine that reaches Debian's and PyPI's mirrors but no image registry:
#                                           the bases are built here instead (below), torch from the local wheel
#   ROLES="api worker-env" deploy/build-images.sh ...    some of them
#
# --offline-base builds two stand-in bases, both Debian bookworm with its Python 3.11 (what python:3.11-slim-bookworm
# is), from debootstrap: openclaw-rl/base-python:3.11-bookworm (a virtualenv on PATH, so `python` and `pip` are what
# the official image gives), and for the trainer openclaw-rl/base-torch-cpu:<torch> (the same with the CPU torch, as
# the CUDA base brings torch; a CPU trainer image, for trials and the hosts harness: `openclaw-rl bench hosts
# --images`). TORCH_WHEEL names the CPU wheel (default: pip's find-links folder). Root only (debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."

OFFLINE=0
[ "${1:-}" = "--offline-base" ] && OFFLINE=1
ENGINE="${ENGINE:-$(command -v docker >/dev/null && docker info >/dev/null 2>&1 && echo docker || echo podman)}"
# What the build needs, from Debian when missing (as the Makefile's system-deps): podman (no daemon) with runc, and
# debootstrap for the stand-in bases.
need=()
[ "$ENGINE" = podman ] && { command -v podman >/dev/null || need+=(podman); command -v runc >/dev/null || need+=(runc); }
[ "$OFFLINE" = 1 ] && ! command -v debootstrap >/dev/null && need+=(debootstrap)
if [ "${#need[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || { echo "build-images: install ${need[*]} first" >&2; exit 2; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
VERSION=$(python3 -c "import tomllib; print(tomllib.load(open('pyproject.toml', 'rb'))['project']['version'])")
TORCH_PIN=$(grep -oE 'torch==[0-9.]+' Makefile | head -1)
ROLES="${ROLES-api worker-workflow worker-policy worker-judge worker-env trainer}"
BUILD=("$ENGINE" build --network host)
RUN=("$ENGINE" run --rm --network host)
if [ "$ENGINE" = podman ]; then
  # A host on cgroup v1 or hybrid with no CAP_SYS_RESOURCE (a CI runner, a container): runc copes, crun does not;
  # podman's default ulimits sit above the hard limits such a host allows.
  RUNTIME=(--runtime "${PODMAN_RUNTIME:-runc}")
  LIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=4096:4096")
  BUILD=(podman "${RUNTIME[@]}" build --network host "${LIMITS[@]}")
  RUN=(podman "${RUNTIME[@]}" run --rm --network host "${LIMITS[@]}")
fi
ARGS=()

offline_bases() {
  local root py=openclaw-rl/base-python:3.11-bookworm
  if ! "$ENGINE" image exists "$py" 2>/dev/null && ! "$ENGINE" image inspect "$py" >/dev/null 2>&1; then
    root=$(mktemp -d)
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$root" \
      "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
    chroot "$root" python3 -m venv /opt/python
    # The base trusts what this machine trusts (a TLS-intercepting proxy's CA included): pip reaches PyPI as here.
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    chroot "$root" sh -c 'rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin'
    tar -C "$root" -c . | "$ENGINE" import --change "ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
      --change "ENV LANG=C.UTF-8" \
      --change "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt" --change "ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" \
      --change 'CMD ["python3"]' - "$py" >/dev/null
    rm -rf "$root"
  fi
  # torch from an index served here (the builds use the host's network): the local CPU wheel for torch, PyPI for the
  # rest (a redirect), as download.pytorch.org serves torch and its dependencies; the Dockerfiles' own line runs.
  local wheel
  wheel="${TORCH_WHEEL:-$(ls "${PIP_FIND_LINKS:-/opt/wheels}"/torch-"${TORCH_PIN#torch==}"+cpu-cp311-*.whl 2>/dev/null | head -1 || true)}"
  [ -f "$wheel" ] || { echo "build-images: no CPU wheel of $TORCH_PIN for Python 3.11 (set TORCH_WHEEL)" >&2; exit 2; }
  local port
  port=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
  python3 - "$(realpath "$wheel")" "$port" <<'PY' >/dev/null 2>&1 &
import http.server, os, sys, urllib.parse
wheel, port = sys.argv[1], int(sys.argv[2])
name = os.path.basename(wheel)
class Index(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.path = urllib.parse.unquote(self.path)
        if self.path.rstrip("/") == "/simple/torch":
            body = f'<a href="/files/{name}">{name}</a>'.encode()
            self.send_response(200), self.send_header("Content-Type", "text/html"), self.end_headers()
            self.wfile.write(body)
        elif self.path == f"/files/{name}":
            self.send_response(200), self.send_header("Content-Length", str(os.path.getsize(wheel))), self.end_headers()
            with open(wheel, "rb") as f:
                while chunk := f.read(1 << 20):
                    self.wfile.write(chunk)
        elif self.path.startswith("/simple/"):
            self.send_response(302), self.send_header("Location", "https://pypi.org" + self.path)
            self.end_headers()
        else:
            self.send_error(404)
http.server.ThreadingHTTPServer(("127.0.0.1", port), Index).serve_forever()
PY
  SERVER=$!
  trap 'kill $SERVER' EXIT
  local torch_index="http://127.0.0.1:$port/simple"
  printf 'ARG PYTHON_IMAGE\nFROM ${PYTHON_IMAGE}\nARG TORCH_INDEX\nRUN pip install --no-cache-dir --index-url "${TORCH_INDEX}" %s\n' "$TORCH_PIN" |
    "${BUILD[@]}" -t "openclaw-rl/base-torch-cpu:${TORCH_PIN#torch==}" --build-arg "PYTHON_IMAGE=$py" \
      --build-arg "TORCH_INDEX=$torch_index" -f - deploy/docker >/dev/null
  ARGS=(--build-arg "PYTHON_IMAGE=$py" --build-arg "TORCH_INDEX=$torch_index"
    --build-arg "TRAINER_IMAGE=openclaw-rl/base-torch-cpu:${TORCH_PIN#torch==}")
}

[ "$OFFLINE" = 1 ] && offline_bases
for role in $ROLES; do
  start=$(date +%s)
  "${BUILD[@]}" "${ARGS[@]}" -f "deploy/docker/Dockerfile.$role" -t "openclaw-rl/$role:$VERSION" . >"/tmp/openclaw-rl-image-$role.log" 2>&1 ||
    { tail -30 "/tmp/openclaw-rl-image-$role.log"; echo "building $role failed (log: /tmp/openclaw-rl-image-$role.log)" >&2; exit 1; }
  # The image runs its own CLI, installed from the checkout (not editable), as its CMD would.
  "${RUN[@]}" --entrypoint openclaw-rl "openclaw-rl/$role:$VERSION" --help >/dev/null
  echo "openclaw-rl/$role:$VERSION built in $(($(date +%s) - start)) s, $("$ENGINE" image inspect -f '{{.Size}}' "openclaw-rl/$role:$VERSION" | awk '{printf "%.0f MiB", $1 / 1048576}')"
done
