#!/usr/bin/env bash
# Builds the test and ops tools from the Go module proxy into a cache outside the repo:
#   kube-apiserver, kubectl and the rest of a one-node cluster (kube-controller-manager,
#   kube-scheduler, kubelet, kube-proxy) from tools/kube, etcd (tools/etcd), k6 and helm
#   (go install), crictl and metrics-server for the local cluster (scripts/cluster.sh), stripe-mock
#   (go install) for the card payment tests and `npm start`, syft and cosign (go install) for
#   `npm run image -- --sbom --sign` (docs/adr/0122), traefik (tools/traefik) as the ingress
#   controller of the e2e HTTPS test (test/e2e/https.ts).
# Why wrapper modules: `go install k8s.io/kubernetes/cmd/kube-apiserver@v1.x` is refused,
# because k8s.io/kubernetes requires its staging modules (k8s.io/api, client-go, ...) at
# v0.0.0 and replaces them with ./staging paths, and replace directives of a dependency are
# ignored. tools/kube/go.mod requires k8s.io/kubernetes and itself replaces every staging
# module with its published v0.<minor>.<patch>. go.etcd.io/etcd/server/v3 has replaces too;
# as a dependency of tools/etcd (kept apart so it cannot shift the apiserver's dependencies)
# its replaces are ignored and its published sibling modules are used. After changing KUBE_VERSION or ETCD_VERSION run this script with
# --sync-modules once and commit tools/*/go.{mod,sum}.
# Output: one line per tool on stderr; the bin dir, alone, as the last line on stdout.
# Env: PROXYFLEET_TOOLS_DIR (default ~/.cache/proxyfleet/tools), PROXYFLEET_BUILD_JOBS (2).
set -euo pipefail

KUBE_VERSION=v1.34.4            # k8s.io/kubernetes; staging modules at v0.<minor>.<patch>
ETCD_VERSION=v3.6.4             # go.etcd.io/etcd/server/v3, the pairing k8s 1.34 pins
K6_VERSION=v1.8.1               # go.k6.io/k6
HELM_MODULE=helm.sh/helm/v4     # helm 4 takes its default kube version from client-go's
HELM_VERSION=v4.3.1             # module version in the build info, so no 1.20 default
CRICTL_VERSION=v1.34.0          # sigs.k8s.io/cri-tools: the local cluster's `down` removes pods through the CRI
METRICS_SERVER_VERSION=v0.8.0   # sigs.k8s.io/metrics-server: the local cluster's resource metrics (HPA on CPU)
STRIPE_MOCK_VERSION=v0.203.0    # github.com/stripe/stripe-mock: Stripe's API for the card payment tests and `npm start`
SYFT_VERSION=v1.57.1            # github.com/anchore/syft: the image's SBOM (SPDX and CycloneDX)
COSIGN_VERSION=v3.1.3           # github.com/sigstore/cosign/v3: the image's signature and SBOM attestation
TRAEFIK_VERSION=v3.6.12         # github.com/traefik/traefik/v3 (tools/traefik): the e2e ingress controller (docs/adr/0123)
MIN_GO=1.26                     # helm v4.3.1's go.mod says go 1.26.0

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${PROXYFLEET_TOOLS_DIR:-${HOME}/.cache/proxyfleet/tools}"
BIN="${TOOLS_DIR}/bin"

log() { printf 'install-tools: %s\n' "$*" >&2; }
die() { printf 'install-tools: error: %s\n' "$*" >&2; exit 1; }

if ! command -v go >/dev/null 2>&1; then
  die "the 'go' command was not found on PATH; install Go >= ${MIN_GO} and put it on PATH"
fi
GO_VER="$(GOTOOLCHAIN=local go env GOVERSION)"   # e.g. go1.26.8
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
ver_ge "${GO_VER#go}" "${MIN_GO}" || die "${GO_VER} is too old: Go >= ${MIN_GO} is needed"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off
export GOFLAGS="-p=${PROXYFLEET_BUILD_JOBS:-2} -buildvcs=false"

kube_minor="$(echo "${KUBE_VERSION#v}" | cut -d. -f2)"
kube_patch="$(echo "${KUBE_VERSION#v}" | cut -d. -f3)"
STAGING_VERSION="v0.${kube_minor}.${kube_patch}"

# --sync-modules: regenerate tools/kube/go.mod from k8s.io/kubernetes@KUBE_VERSION's own go.mod
# (its go and godebug lines and its `=> ./staging/src/...` list) and pin tools/etcd, then tidy.
sync_modules() {
  local upstream kmod="${ROOT}/tools/kube/go.mod" emod="${ROOT}/tools/etcd/go.mod"
  upstream="$(cd "${ROOT}/tools/kube" && go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  [ -f "${upstream}" ] || die "could not download k8s.io/kubernetes@${KUBE_VERSION}"
  {
    grep '^//' "${kmod}" | sed "s/k8s.io\/kubernetes v[0-9.]*/k8s.io\/kubernetes ${KUBE_VERSION}/"
    echo 'module proxyfleet.local/tools/kube'; echo
    grep -E '^go ' "${upstream}"; echo
    if grep -qE '^godebug' "${upstream}"; then grep -E '^godebug' "${upstream}"; echo; fi
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"; echo
    echo 'replace ('
    grep -E '=> \./staging/src/' "${upstream}" | awk -v v="${STAGING_VERSION}" '{print "\t" $1 " => " $1 " " v}'
    echo ')'
  } > "${kmod}.new"
  mv "${kmod}.new" "${kmod}"
  rm -f "${ROOT}/tools/kube/go.sum"
  (cd "${ROOT}/tools/kube" && go mod tidy)
  sed -i "s#^require go.etcd.io/etcd/server/v3 .*#require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}#" "${emod}"
  rm -f "${ROOT}/tools/etcd/go.sum"
  (cd "${ROOT}/tools/etcd" && go mod tidy)
  log "tools/kube and tools/etcd now pin ${KUBE_VERSION} (${STAGING_VERSION}) and etcd ${ETCD_VERSION}; commit them"
}

case "${1:-}" in
  --sync-modules) sync_modules ;;
  "") ;;
  *) die "unknown argument '$1' (the only option is --sync-modules)" ;;
esac

# The committed wrappers must match the variables above, or a "cached" stamp would lie.
grep -qE "^require k8s.io/kubernetes ${KUBE_VERSION}\$" "${ROOT}/tools/kube/go.mod" \
  && grep -qE "k8s.io/client-go => k8s.io/client-go ${STAGING_VERSION}\$" "${ROOT}/tools/kube/go.mod" \
  || die "tools/kube/go.mod does not pin ${KUBE_VERSION}; run: bash scripts/install-tools.sh --sync-modules"
grep -qE "^require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}\$" "${ROOT}/tools/etcd/go.mod" \
  || die "tools/etcd/go.mod does not pin ${ETCD_VERSION}; run: bash scripts/install-tools.sh --sync-modules"
grep -qE "^require github.com/traefik/traefik/v3 ${TRAEFIK_VERSION}\$" "${ROOT}/tools/traefik/go.mod" \
  || die "tools/traefik/go.mod does not pin ${TRAEFIK_VERSION}; edit its require line and replaces, then go mod tidy there"

mkdir -p "${BIN}"
# One installer at a time per tools dir (parallel test workers may all call this script).
exec 9>"${TOOLS_DIR}/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

# is_cached NAME VERSION: the binary and its versioned stamp both exist.
is_cached() { [ -x "${BIN}/$1" ] && [ -f "${BIN}/.$1-$2" ]; }
# mark_built NAME VERSION SECONDS: move the fresh binary in place, replace older stamps.
mark_built() {
  mv -f "${BIN}/.$1.tmp" "${BIN}/$1"
  rm -f "${BIN}/.$1-"*
  printf '%s %s built %s\n' "$1" "$2" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "${BIN}/.$1-$2"
  log "$1 $2 built in $3s"
}

# Version stamping as kubernetes' hack/lib/version.sh does; the build date is the release
# tag's time from the module proxy, so rebuilds are reproducible. The proxy gives no commit
# hash: gitCommit is left empty rather than the "$Format:%H$" placeholder.
kube_ldflags() {
  local date pkg flags="-s -w"
  date="$(cd "${ROOT}/tools/kube" && go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${kube_minor}"
    flags+=" -X ${pkg}.gitVersion=${KUBE_VERSION} -X ${pkg}.gitTreeState=clean -X ${pkg}.gitCommit="
    flags+=" -X ${pkg}.buildDate=${date:-1970-01-01T00:00:00Z}"
  done
  printf '%s' "${flags}"
}

for cmd in kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy; do
  if is_cached "${cmd}" "${KUBE_VERSION}"; then log "${cmd} ${KUBE_VERSION} cached"; continue; fi
  log "${cmd} ${KUBE_VERSION} building (cold: several minutes)"
  start=${SECONDS}
  (cd "${ROOT}/tools/kube" && go build -trimpath -ldflags "$(kube_ldflags)" \
    -o "${BIN}/.${cmd}.tmp" "k8s.io/kubernetes/cmd/${cmd}")
  mark_built "${cmd}" "${KUBE_VERSION}" $((SECONDS - start))
done

if is_cached etcd "${ETCD_VERSION}"; then log "etcd ${ETCD_VERSION} cached"; else
  log "etcd ${ETCD_VERSION} building"
  start=${SECONDS}
  (cd "${ROOT}/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "${BIN}/.etcd.tmp" go.etcd.io/etcd/server/v3)
  mark_built etcd "${ETCD_VERSION}" $((SECONDS - start))
fi

# Traefik's go.mod replaces three modules with forks, so `go install ...@version` is refused;
# tools/traefik repeats the replaces (newer releases import a module the proxy does not serve).
if is_cached traefik "${TRAEFIK_VERSION}"; then log "traefik ${TRAEFIK_VERSION} cached"; else
  log "traefik ${TRAEFIK_VERSION} building"
  start=${SECONDS}
  (cd "${ROOT}/tools/traefik" && go build -trimpath \
    -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=${TRAEFIK_VERSION}" \
    -o "${BIN}/.traefik.tmp" github.com/traefik/traefik/v3/cmd/traefik)
  mark_built traefik "${TRAEFIK_VERSION}" $((SECONDS - start))
fi

# go_install NAME PACKAGE VERSION LDFLAGS: module@version has no replace directives, so a
# plain go install works; GOBIN is a temp dir so a failed build leaves the old binary.
go_install() {
  local name="$1" pkg="$2" version="$3" ldflags="$4" tmp
  if is_cached "${name}" "${version}"; then log "${name} ${version} cached"; return; fi
  log "${name} ${version} building"
  start=${SECONDS}
  tmp="$(mktemp -d "${TOOLS_DIR}/.gobin.XXXXXX")"
  (cd "${TOOLS_DIR}" && GOBIN="${tmp}" go install -trimpath -ldflags "${ldflags}" "${pkg}@${version}")
  mv -f "${tmp}/${name}" "${BIN}/.${name}.tmp"
  rmdir "${tmp}"
  mark_built "${name}" "${version}" $((SECONDS - start))
}

go_install k6 go.k6.io/k6 "${K6_VERSION}" "-s -w"
go_install crictl sigs.k8s.io/cri-tools/cmd/crictl "${CRICTL_VERSION}" "-s -w"
go_install metrics-server sigs.k8s.io/metrics-server/cmd/metrics-server "${METRICS_SERVER_VERSION}" "-s -w"
go_install stripe-mock github.com/stripe/stripe-mock "${STRIPE_MOCK_VERSION}" "-s -w"
go_install helm "${HELM_MODULE}/cmd/helm" "${HELM_VERSION}" \
  "-s -w -X ${HELM_MODULE}/internal/version.version=${HELM_VERSION} -X ${HELM_MODULE}/internal/version.gitTreeState=clean"

# Versions as their releases stamp them (syft's goreleaser ldflags; cosign's Makefile LDFLAGS).
go_install syft github.com/anchore/syft/cmd/syft "${SYFT_VERSION}" "-s -w -X main.version=${SYFT_VERSION#v}"
go_install cosign github.com/sigstore/cosign/v3/cmd/cosign "${COSIGN_VERSION}" \
  "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=${COSIGN_VERSION} -X sigs.k8s.io/release-utils/version.gitTreeState=clean"

log "tools in ${BIN}"
printf '%s\n' "${BIN}"
