#!/usr/bin/env bash
# `bash scripts/previous-release.sh [CURRENT_IMAGE]`: the previous release, the one an upgrade
# starts from and a rollback returns to (migrations/previous-release.json: its tag, and the commit
# the tag points at), as a source tree for its chart and as an image in the one-node cluster's
# containerd, for the upgrade e2e (test/e2e/upgrade.ts; docs/adr/0124).
# - The revision: the tag where this clone has it (and it points at the recorded commit), else the
#   commit (a CI clone may fetch no tags); neither: an error that says how to fetch it.
# - The tree: `git archive` of that revision, kept in ${PROXYFLEET_CACHE_DIR}/previous/<commit> (a
#   release never changes).
# - The image: built by that revision's own scripts/image.sh, tagged
#   localhost/proxyfleet:previous-<short commit>; built FROM the base of CURRENT_IMAGE when given
#   (the same Node, and the base stand-in of this checkout is neither rebuilt nor replaced).
# - Loaded with scripts/cluster.sh's load_image (the cluster must be up: `npm run cluster -- up`).
# Output: progress on stderr; the image reference and the tree, on the last line of stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PROXYFLEET_CACHE_DIR:-${HOME}/.cache/proxyfleet}/previous"
RECORD="${HERE}/migrations/previous-release.json"
export CONTAINERS_CONF="${CONTAINERS_CONF:-${HERE}/scripts/image/containers.conf}"
say() { printf 'previous-release: %s\n' "$*" >&2; }
fail() { printf 'previous-release: error: %s\n' "$*" >&2; exit 1; }

release="$(sed -n 's/^  "release": "\(.*\)",$/\1/p' "${RECORD}")"
commit="$(sed -n 's/^  "commit": "\([0-9a-f]\{40\}\)",$/\1/p' "${RECORD}")"
[ -n "${release}" ] && [ -n "${commit}" ] || fail "no release or commit in ${RECORD}"
if tagged="$(git -C "${HERE}" rev-parse -q --verify "refs/tags/${release}^{commit}")"; then
  [ "${tagged}" = "${commit}" ] || fail "tag ${release} is ${tagged}, but ${RECORD} records ${commit}"
  rev="${release}"
elif git -C "${HERE}" cat-file -e "${commit}^{commit}" 2>/dev/null; then
  rev="${commit}"
else
  fail "neither tag ${release} nor commit ${commit} is in this clone (git fetch origin tag ${release}, or git fetch --unshallow)"
fi
say "${release} is ${commit} (found by $([ "${rev}" = "${release}" ] && echo tag || echo commit))"

tree="${CACHE}/${commit}"
if [ ! -f "${tree}/.complete" ]; then
  rm -rf "${tree}"
  mkdir -p "${tree}"
  git -C "${HERE}" archive "${rev}" | tar -x -C "${tree}"
  touch "${tree}/.complete"
fi
# That revision's image.sh reads the project's Node binary (for the base stand-in's inputs) from
# its tree's node_modules: this checkout's. The build context leaves node_modules out (.dockerignore).
mkdir -p "${tree}/node_modules/node/bin"
ln -sfn "${HERE}/node_modules/node/bin/node" "${tree}/node_modules/node/bin/node"

image="localhost/proxyfleet:previous-${commit:0:7}"
if podman image exists "${image}"; then
  say "${image} already built"
else
  base=""
  if [ -n "${1:-}" ]; then
    # The stand-in's label, inherited by the image built FROM it; none: the upstream node image.
    inputs="$(podman image inspect --format '{{index .Config.Labels "proxyfleet.io/base-inputs"}}' "$1")"
    case "${inputs}" in '' | '<no value>') base=docker.io/library/node:24-slim ;; *) base="localhost/proxyfleet-node-base:${inputs}" ;; esac
  fi
  say "building ${image} with ${release}'s scripts/image.sh${base:+ FROM ${base}}"
  PROXYFLEET_IMAGE="${image}" PROXYFLEET_IMAGE_BASE="${base}" bash "${tree}/scripts/image.sh" >/dev/null
fi

# Sourced, cluster.sh only defines its functions (load_image: podman save | ctr import, verified).
# shellcheck source=scripts/cluster.sh
source "${HERE}/scripts/cluster.sh"
load_image "${image}"
printf '%s %s\n' "${image}" "${tree}"
