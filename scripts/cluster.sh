#!/usr/bin/env bash
# `npm run cluster -- up|down|status`: a one-node Kubernetes cluster on this machine, of the
# project's Kubernetes version (KUBE_VERSION in scripts/install-tools.sh): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet and kube-proxy (built by install-tools.sh),
# containerd (Debian) with a bridge CNI (/usr/lib/cni), a local pause image, the proxyfleet image
# (`npm run image`) loaded, and a PostgreSQL server for the chart (the machine's PostgreSQL
# binaries, its own data directory). See docs/adr/0065-images-and-cluster-without-a-registry.md
# and docs/operator.md ("A real cluster on your machine").
#
# The pod network stays inside the machine: a bridge and subnet this script owns, pods get a
# route to the Service range only (no default route), no masquerade, IP forwarding on for the
# bridge alone and back onto it only (a pod's connection to a Service). Tests reach pods through
# `kubectl port-forward`, a NodePort on 127.0.0.1 (kube-proxy binds NodePorts to 127.0.0.1 only)
# or, from the machine, at their addresses on the bridge.
#
#   up      start what is not running (idempotent; seconds when warm); prints the kubeconfig path last
#   down    stop everything and remove processes, mounts, network namespaces, the bridge, the exit
#           addresses' interface and the iptables rules; keeps the caches (binaries, the containerd image store)
#   status  what runs
#   fresh   `down`, then remove the caches too (containerd's store, the image stamps, the pause
#           image): the machine as if it never ran a cluster; the next `up` is a cold one
#
# Env: PROXYFLEET_CLUSTER_DIR (state, default /var/lib/proxyfleet-cluster), PROXYFLEET_IMAGE
# (default localhost/proxyfleet:<package.json version>), PROXYFLEET_CLUSTER_SKIP_IMAGE=1 (load no
# proxyfleet image), PROXYFLEET_TOOLS_BIN.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF="${ROOT}/scripts/cluster"
STATE="${PROXYFLEET_CLUSTER_DIR:-/var/lib/proxyfleet-cluster}"
KEEP="${STATE}/keep"       # survives `down`: the containerd image store, the pause binary
RUN="${STATE}/run"         # pid files, logs
BRIDGE=pfk0
# The node's exit addresses (network_up; removed by `down`): an interface of their own with
# addresses of the benchmarking range (RFC 2544), /32 each, so nothing is routed off the machine.
# A bridge without ports: the dummy link type needs a kernel module that machines like this one
# (a container's kernel) do not have; the bridge module is needed for the pods anyway. A hostNetwork
# gateway's sourceAddress exits bind them (the e2e project; docs/gateway.md, "Topologies").
EXIT_LINK=pfexit0
EXIT_ADDRESSES="198.18.77.11 198.18.77.12 198.18.77.13"
# The FORWARD rule that keeps pods' packets on the bridge (network_up; removed by `down`).
BRIDGE_FORWARD_GUARD="-i ${BRIDGE} ! -o ${BRIDGE} -m comment --comment proxyfleet-cluster -j DROP"
POD_CIDR=10.213.77.0/24
NODE_IP=10.213.77.1
POD_RANGE_START=10.213.77.10
SERVICE_CIDR=10.213.78.0/24
KUBERNETES_SERVICE_IP=10.213.78.1
API_PORT=16443
ETCD_PORT=12379
PG_PORT=15432
NODE_NAME=proxyfleet-node
PAUSE_IMAGE=localhost/proxyfleet-pause:1
KUBECONFIG_FILE="${STATE}/kubeconfig"
SOCK="${KEEP}/containerd/containerd.sock"
export CONTAINERS_CONF="${CONTAINERS_CONF:-${ROOT}/scripts/image/containers.conf}"

log() { printf 'cluster: %s\n' "$*" >&2; }
die() { printf 'cluster: error: %s\n' "$*" >&2; exit 1; }
elapsed() { printf '%ss' "$((SECONDS - t0))"; }
t0=${SECONDS}

tools_bin() {
  if [ -n "${PROXYFLEET_TOOLS_BIN:-}" ]; then printf '%s' "${PROXYFLEET_TOOLS_BIN}"; return; fi
  bash "${ROOT}/scripts/install-tools.sh" | tail -n1
}

# --- processes: started with setsid, one pid file each; stopped by that pid only -------------
pidof_component() { local f="${RUN}/$1.pid"; [ -f "${f}" ] && cat "${f}"; }
alive() {
  local pid; pid="$(pidof_component "$1")" || return 1
  [ -n "${pid}" ] && [ -d "/proc/${pid}" ] && grep -qa -- "$2" "/proc/${pid}/cmdline" 2>/dev/null
}
start() { # start NAME BINARY ARGS...
  local name="$1"; shift
  mkdir -p "${RUN}"
  # 9>&-: the daemon must not inherit the lock of `up` (it would hold it for its whole life).
  setsid "$@" >>"${RUN}/${name}.log" 2>&1 < /dev/null 9>&- &
  echo $! > "${RUN}/${name}.pid"
}
stop() { # stop NAME MATCH [SECONDS]
  local pid i
  pid="$(pidof_component "$1")" || return 0
  if alive "$1" "$2"; then
    kill -TERM "${pid}" 2>/dev/null || true
    for i in $(seq 1 $((${3:-20} * 5))); do [ -d "/proc/${pid}" ] || break; sleep 0.2; done
    if [ -d "/proc/${pid}" ]; then log "$1 (pid ${pid}) did not stop: killing it"; kill -KILL "${pid}" 2>/dev/null || true; fi
  fi
  rm -f "${RUN}/$1.pid"
}
wait_for() { # wait_for WHAT SECONDS COMMAND...
  local what="$1" secs="$2" i; shift 2
  for i in $(seq 1 $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "${what} did not come up within ${secs}s (logs: ${RUN}/)"
}

# --- prerequisites --------------------------------------------------------------------------
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is missing (apt-get install $2)"; }
check_prerequisites() {
  need containerd containerd; need ctr containerd; need runc runc; need iptables iptables
  need ip iproute2; need openssl openssl; need podman podman; need buildah buildah; need go golang
  need curl curl
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] \
    || die "the CNI plugins are missing (apt-get install containernetworking-plugins)"
  pg_bin >/dev/null || die "PostgreSQL's server binaries are missing (apt-get install postgresql)"
  [ "$(id -u)" = 0 ] || die "the cluster needs root (containerd, kubelet, the bridge)"
}
pg_bin() { local d; d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"; [ -x "${d}/postgres" ] && printf '%s' "${d}"; }

# --- PKI: one CA; the apiserver's serving cert; one admin client cert every component uses ---
pki() {
  local p="${STATE}/pki"
  [ -f "${p}/admin.crt" ] && return 0
  mkdir -p "${p}"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=proxyfleet-cluster-ca \
    -keyout "${p}/ca.key" -out "${p}/ca.crt" 2>/dev/null
  cat > "${p}/apiserver.ext" <<EOF
subjectAltName=IP:${NODE_IP},IP:${KUBERNETES_SERVICE_IP},IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EOF
  printf 'extendedKeyUsage=clientAuth\n' > "${p}/client.ext"
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "${p}/apiserver.key" -out "${p}/apiserver.csr" 2>/dev/null
  openssl x509 -req -in "${p}/apiserver.csr" -CA "${p}/ca.crt" -CAkey "${p}/ca.key" -CAcreateserial -days 3650 \
    -extfile "${p}/apiserver.ext" -out "${p}/apiserver.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=proxyfleet-cluster-admin" -keyout "${p}/admin.key" -out "${p}/admin.csr" 2>/dev/null
  openssl x509 -req -in "${p}/admin.csr" -CA "${p}/ca.crt" -CAkey "${p}/ca.key" -CAcreateserial -days 3650 \
    -extfile "${p}/client.ext" -out "${p}/admin.crt" 2>/dev/null
  # The aggregation layer (metrics.k8s.io): the apiserver proxies to metrics-server with a client
  # certificate of its own CA, and metrics-server trusts the user it names in headers.
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=proxyfleet-front-proxy-ca \
    -keyout "${p}/front-proxy-ca.key" -out "${p}/front-proxy-ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=front-proxy-client -keyout "${p}/front-proxy-client.key" -out "${p}/front-proxy-client.csr" 2>/dev/null
  openssl x509 -req -in "${p}/front-proxy-client.csr" -CA "${p}/front-proxy-ca.crt" -CAkey "${p}/front-proxy-ca.key" -CAcreateserial \
    -days 3650 -extfile "${p}/client.ext" -out "${p}/front-proxy-client.crt" 2>/dev/null
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "${p}/sa.key" 2>/dev/null
  openssl pkey -in "${p}/sa.key" -pubout -out "${p}/sa.pub" 2>/dev/null
  cat > "${KUBECONFIG_FILE}" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: proxyfleet
    cluster: { server: "https://${NODE_IP}:${API_PORT}", certificate-authority: "${p}/ca.crt" }
users:
  - name: admin
    user: { client-certificate: "${p}/admin.crt", client-key: "${p}/admin.key" }
contexts:
  - name: proxyfleet
    context: { cluster: proxyfleet, user: admin, namespace: default }
current-context: proxyfleet
EOF
  chmod 600 "${KUBECONFIG_FILE}"
}

render() { # render TEMPLATE > OUT
  sed -e "s#@STATE@#${KEEP}#g; s#@PAUSE_IMAGE@#${PAUSE_IMAGE}#g; s#@BRIDGE@#${BRIDGE}#g; s#@POD_CIDR@#${POD_CIDR}#g" \
    -e "s#@POD_RANGE_START@#${POD_RANGE_START}#g; s#@NODE_IP@#${NODE_IP}#g; s#@SERVICE_CIDR@#${SERVICE_CIDR}#g" \
    "$1"
}

sysctl_save_set() { # sysctl_save_set KEY VALUE: remember the machine's value for `down`
  local k="$1" v="$2" f="${STATE}/sysctl.saved"
  grep -q "^${k}=" "${f}" 2>/dev/null || echo "${k}=$(sysctl -n "${k}")" >> "${f}"
  sysctl -qw "${k}=${v}"
}

network_up() {
  if ! ip link show "${BRIDGE}" >/dev/null 2>&1; then
    ip link add "${BRIDGE}" type bridge
    ip addr add "${NODE_IP}/24" dev "${BRIDGE}"
  fi
  ip link set "${BRIDGE}" up
  exits_up
  mkdir -p "${KEEP}/cni/net.d"
  render "${CONF}/10-bridge.conflist" > "${KEEP}/cni/net.d/10-bridge.conflist"
  # kube-proxy's NodePorts on 127.0.0.1 are DNATed to pod addresses: the kernel must route
  # 127.0.0.0/8 sources off lo for that (restored by `down`).
  sysctl_save_set net.ipv4.conf.all.route_localnet 1
  # A pod's connection to a Service (the change relay's, docs/adr/0105) reaches the node, which
  # DNATs it to a pod on this bridge and must route it back out: forwarding on for what arrives
  # on the bridge only (the machine's own net.ipv4.ip_forward stays as it is; the setting goes
  # with the bridge on `down`), and what arrives on it may leave only onto it again.
  sysctl -qw "net.ipv4.conf.${BRIDGE}.forwarding=1"
  # shellcheck disable=SC2086
  iptables -C FORWARD ${BRIDGE_FORWARD_GUARD} 2>/dev/null || iptables -I FORWARD 1 ${BRIDGE_FORWARD_GUARD}
}

# The exit addresses, each one added if absent (a test may have removed one to see the gateway
# report it missing): `up` puts back the whole set. `replace` is idempotent; a check through
# `ip ... | grep -q` was not: under pipefail, grep leaving at its match can end ip with SIGPIPE,
# and the address already there was added again ("Address already assigned", an e2e run's `up`).
exits_up() {
  local a
  ip link show "${EXIT_LINK}" >/dev/null 2>&1 || ip link add "${EXIT_LINK}" type bridge
  ip link set "${EXIT_LINK}" up
  for a in ${EXIT_ADDRESSES}; do ip addr replace "${a}/32" dev "${EXIT_LINK}"; done
}

postgres_up() {
  local bin data="${STATE}/postgres/data" sockdir="${STATE}/postgres/run"
  bin="$(pg_bin)"
  if [ -f "${data}/postmaster.pid" ] && runuser -u postgres -- "${bin}/pg_ctl" -D "${data}" status >/dev/null 2>&1; then return 0; fi
  if [ ! -f "${data}/PG_VERSION" ]; then
    mkdir -p "${STATE}/postgres"; chown postgres: "${STATE}/postgres"; chmod 755 "${STATE}" "${STATE}/postgres"
    runuser -u postgres -- "${bin}/initdb" -D "${data}" -U postgres --auth=trust -E UTF8 --no-sync >/dev/null
    echo "host all all ${POD_CIDR} trust" >> "${data}/pg_hba.conf"
  fi
  runuser -u postgres -- mkdir -p "${sockdir}"
  runuser -u postgres -- "${bin}/pg_ctl" -D "${data}" -l "${STATE}/postgres/postgres.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1,${NODE_IP} -p ${PG_PORT} -k ${sockdir} -c fsync=off -c max_connections=200" start >/dev/null 9>&-
}

containerd_up() {
  if alive containerd "${STATE}/containerd.toml"; then return 0; fi
  mkdir -p "${KEEP}/containerd"
  render "${CONF}/containerd.toml" > "${STATE}/containerd.toml"
  start containerd containerd --config "${STATE}/containerd.toml"
  wait_for containerd 30 ctr --address "${SOCK}" version
}

ctr_() { ctr --address "${SOCK}" -n k8s.io "$@"; }

# image_problem REF ID: nothing when containerd (namespace k8s.io) has REF as image ID (the
# config digest podman reports), all its content present and unpacked; otherwise what is wrong,
# in one sentence. Every ctr answer is read whole before it is matched: under pipefail,
# `ctr images ls -q | grep -qx REF` fails when grep exits at the match while ctr still writes
# the names after it (CRI's sha256:<id> names sort after localhost/...): ctr dies of SIGPIPE,
# status 141, and `up` reported "containerd did not take" an image it had taken
# (docs/adr/0093-cluster-image-import-verified-by-digest.md).
image_problem() {
  local ref="$1" id="sha256:${2#sha256:}" checked row target manifest config names
  if ! checked="$(ctr_ images check "name==${ref}" 2>&1)"; then
    printf 'ctr images check %s failed: %s' "${ref}" "${checked}"; return 0
  fi
  row="$(awk -v r="${ref}" '$1 == r' <<<"${checked}")"
  if [ -z "${row}" ]; then
    names="$(ctr_ images ls -q 2>/dev/null || true)"
    printf 'containerd (namespace k8s.io) has no image %s; it lists: %s' "${ref}" "$(tr '\n' ' ' <<<"${names:-nothing}")"
    return 0
  fi
  target="$(awk '{ print $3 }' <<<"${row}")"
  manifest="$(ctr_ content get "${target}" 2>/dev/null || true)"
  config="$(sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' <<<"${manifest}")"
  if [ "${config}" != "${id}" ]; then
    printf "containerd's %s is image %s (manifest %s), podman's is %s" "${ref}" "${config:-unknown}" "${target}" "${id}"
    return 0
  fi
  # REF TYPE DIGEST STATUS... UNPACKED, STATUS as "complete (13/13)".
  if [ "$(awk '{ print $4 }' <<<"${row}")" != complete ] || [ "$(awk '{ print $NF }' <<<"${row}")" != true ]; then
    printf "containerd's %s (image %s) is not complete and unpacked: %s" "${ref}" "${id}" "$(awk '{ $1 = $2 = $3 = ""; print }' <<<"${row}" | sed 's/^ *//')"
  fi
}

# load_image REF: podman save | ctr import, skipped when containerd already has that image ID,
# complete; verified by digest after the import, once more imported if that fails.
load_image() {
  local ref="$1" id stamp problem
  id="$(podman image inspect --format '{{.Id}}' "${ref}")" || die "no image ${ref} (npm run image)"
  stamp="${KEEP}/images/$(printf '%s' "${ref}" | tr '/:' '__').id"
  if [ -f "${stamp}" ] && [ "$(cat "${stamp}")" = "${id}" ] && [ -z "$(image_problem "${ref}" "${id}")" ]; then return 0; fi
  log "loading ${ref} into containerd"
  mkdir -p "${KEEP}/images"
  # A re-import under the same tag can race containerd's garbage collection of the replaced
  # image's layers ("parent snapshot ... does not exist"): a second attempt finds them settled.
  if podman save --format docker-archive "${ref}" | ctr_ images import - >/dev/null; then
    problem="$(image_problem "${ref}" "${id}")"
  else
    problem="the import failed"
  fi
  if [ -n "${problem}" ]; then
    log "importing ${ref} again (${problem})"
    podman save --format docker-archive "${ref}" | ctr_ images import - >/dev/null || die "importing ${ref} into containerd failed twice"
    problem="$(image_problem "${ref}" "${id}")"
    [ -z "${problem}" ] || die "containerd did not take ${ref} (podman's image sha256:${id#sha256:}): ${problem}"
  fi
  echo "${id}" > "${stamp}"
}

pause_image() {
  if ! podman image exists "${PAUSE_IMAGE}"; then
    log "building the pause image ${PAUSE_IMAGE}"
    mkdir -p "${KEEP}/pause"
    (cd "${CONF}/pause" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w" -o "${KEEP}/pause/pause" .)
    local c; c="$(buildah from scratch)"
    buildah copy --quiet "${c}" "${KEEP}/pause/pause" /pause >/dev/null
    buildah config --entrypoint '["/pause"]' --user 65535:65535 "${c}"
    buildah commit --quiet --rm "${c}" "${PAUSE_IMAGE}" >/dev/null
  fi
  load_image "${PAUSE_IMAGE}"
}

control_plane_up() {
  local bin="$1" k=(--kubeconfig "${KUBECONFIG_FILE}") p="${STATE}/pki"
  if ! alive etcd "${bin}/etcd"; then
    start etcd "${bin}/etcd" --data-dir "${STATE}/etcd" --name "${NODE_NAME}" \
      --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
      --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
      --initial-cluster "${NODE_NAME}=http://127.0.0.1:$((ETCD_PORT + 1))" --unsafe-no-fsync --log-level error
    wait_for etcd 30 curl -sf "http://127.0.0.1:${ETCD_PORT}/health"
  fi
  if ! alive kube-apiserver "${bin}/kube-apiserver"; then
    start kube-apiserver "${bin}/kube-apiserver" --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
      --bind-address "${NODE_IP}" --advertise-address "${NODE_IP}" --secure-port "${API_PORT}" \
      --tls-cert-file "${p}/apiserver.crt" --tls-private-key-file "${p}/apiserver.key" --client-ca-file "${p}/ca.crt" \
      --kubelet-client-certificate "${p}/admin.crt" --kubelet-client-key "${p}/admin.key" \
      --service-cluster-ip-range "${SERVICE_CIDR}" --service-node-port-range 30000-32767 \
      --service-account-issuer https://kubernetes.default.svc.cluster.local \
      --service-account-key-file "${p}/sa.pub" --service-account-signing-key-file "${p}/sa.key" \
      --authorization-mode Node,RBAC --allow-privileged=false --enable-priority-and-fairness=false \
      --kubelet-preferred-address-types InternalIP \
      --requestheader-client-ca-file "${p}/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
      --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
      --requestheader-extra-headers-prefix X-Remote-Extra- \
      --proxy-client-cert-file "${p}/front-proxy-client.crt" --proxy-client-key-file "${p}/front-proxy-client.key" \
      --enable-aggregator-routing=true --v 0
    wait_for kube-apiserver 90 "${bin}/kubectl" "${k[@]}" get --raw /readyz
  fi
  if ! alive kube-controller-manager "${bin}/kube-controller-manager"; then
    start kube-controller-manager "${bin}/kube-controller-manager" "${k[@]}" --leader-elect=false \
      --bind-address 127.0.0.1 --secure-port 10357 --root-ca-file "${p}/ca.crt" \
      --service-account-private-key-file "${p}/sa.key" --use-service-account-credentials \
      --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}" \
      --horizontal-pod-autoscaler-sync-period 5s --node-monitor-grace-period 40s
  fi
  if ! alive kube-scheduler "${bin}/kube-scheduler"; then
    start kube-scheduler "${bin}/kube-scheduler" "${k[@]}" --leader-elect=false --bind-address 127.0.0.1 --secure-port 10359 \
      --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}"
  fi
}

node_up() {
  local bin="$1"
  if ! alive kubelet "${bin}/kubelet"; then
    mkdir -p "${STATE}/kubelet" "${STATE}/pod-logs"
    sed -e "s#@SOCK@#${SOCK}#g; s#@NODE_IP@#${NODE_IP}#g; s#@PKI@#${STATE}/pki#g; s#@LOGS@#${STATE}/pod-logs#g" \
      "${CONF}/kubelet.yaml" > "${STATE}/kubelet.yaml"
    start kubelet "${bin}/kubelet" --config "${STATE}/kubelet.yaml" --kubeconfig "${KUBECONFIG_FILE}" \
      --root-dir "${STATE}/kubelet" --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}" \
      --cert-dir "${STATE}/kubelet/pki" --v 0
  fi
  if ! alive kube-proxy "${bin}/kube-proxy"; then
    start kube-proxy "${bin}/kube-proxy" --kubeconfig "${KUBECONFIG_FILE}" --proxy-mode iptables \
      --hostname-override "${NODE_NAME}" --cluster-cidr "${POD_CIDR}" --nodeport-addresses 127.0.0.1/32 \
      --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
      --metrics-bind-address 127.0.0.1:10349 --healthz-bind-address 127.0.0.1:10356
  fi
  metrics_server_up "${bin}"
  wait_for "the node" 90 sh -c "'${bin}/kubectl' --kubeconfig '${KUBECONFIG_FILE}' get node ${NODE_NAME} -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
}

# metrics-server on the node's address, behind the APIService v1beta1.metrics.k8s.io (a Service
# without selector whose endpoint is that address): `kubectl top` and the HPA's CPU metrics.
METRICS_SERVER_PORT=14443
metrics_server_up() {
  local bin="$1"
  if ! alive metrics-server "${bin}/metrics-server"; then
    mkdir -p "${STATE}/metrics-server"
    start metrics-server "${bin}/metrics-server" --kubeconfig "${KUBECONFIG_FILE}" \
      --authentication-kubeconfig "${KUBECONFIG_FILE}" --authorization-kubeconfig "${KUBECONFIG_FILE}" \
      --bind-address "${NODE_IP}" --secure-port "${METRICS_SERVER_PORT}" --cert-dir "${STATE}/metrics-server" \
      --kubelet-insecure-tls --kubelet-preferred-address-types InternalIP --kubelet-use-node-status-port \
      --metric-resolution 15s --kubelet-request-timeout 5s
  fi
  "${bin}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" apply --server-side --force-conflicts -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: { name: metrics-server, namespace: kube-system }
spec:
  ports: [{ name: https, port: 443, targetPort: ${METRICS_SERVER_PORT} }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server-node
  namespace: kube-system
  labels: { kubernetes.io/service-name: metrics-server }
addressType: IPv4
endpoints: [{ addresses: ["${NODE_IP}"], conditions: { ready: true } }]
ports: [{ name: https, port: ${METRICS_SERVER_PORT}, protocol: TCP }]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: { name: v1beta1.metrics.k8s.io }
spec:
  service: { name: metrics-server, namespace: kube-system, port: 443 }
  group: metrics.k8s.io
  version: v1beta1
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
}

cmd_up() {
  check_prerequisites
  local bin; bin="$(tools_bin)"
  mkdir -p "${STATE}" "${RUN}" "${KEEP}"
  pki
  network_up
  postgres_up
  containerd_up
  pause_image
  if [ "${PROXYFLEET_CLUSTER_SKIP_IMAGE:-}" != 1 ]; then
    local version; version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "${ROOT}/package.json" | head -n1)"
    load_image "${PROXYFLEET_IMAGE:-localhost/proxyfleet:${version}}"
  fi
  control_plane_up "${bin}"
  node_up "${bin}"
  log "up in $(elapsed): kubectl --kubeconfig ${KUBECONFIG_FILE}; PostgreSQL postgresql://postgres@${NODE_IP}:${PG_PORT} (127.0.0.1:${PG_PORT} from the machine)"
  printf '%s\n' "${KUBECONFIG_FILE}"
}

# Pods first, through the CRI (their network namespaces and addresses go with them), then the
# processes, then whatever a crash could have left: shims, mounts, the bridge, iptables rules.
cmd_down() {
  local bin="" pid m
  bin="${PROXYFLEET_TOOLS_BIN:-${HOME}/.cache/proxyfleet/tools/bin}"
  stop kubelet "/kubelet"
  if alive containerd "${STATE}/containerd.toml"; then
    if [ -x "${bin}/crictl" ]; then
      "${bin}/crictl" --runtime-endpoint "unix://${SOCK}" rmp --all --force >/dev/null 2>&1 || true
    fi
    for c in $(ctr_ containers ls -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "${c}" >/dev/null 2>&1 || true
      ctr_ tasks rm -f "${c}" >/dev/null 2>&1 || true
      ctr_ containers rm "${c}" >/dev/null 2>&1 || true
    done
  fi
  stop kube-proxy "/kube-proxy"
  if [ -x "${bin}/kube-proxy" ]; then "${bin}/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  stop containerd "${STATE}/containerd.toml"
  # containerd's shims outlive it: stop the ones of this cluster's socket, by pid.
  for pid in $(grep -las -- "${SOCK}" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    grep -qa containerd-shim "/proc/${pid}/cmdline" 2>/dev/null && kill -KILL "${pid}" 2>/dev/null || true
  done
  stop metrics-server "/metrics-server"
  stop kube-scheduler "/kube-scheduler"
  stop kube-controller-manager "/kube-controller-manager"
  stop kube-apiserver "/kube-apiserver"
  stop etcd "/etcd"
  if [ -f "${STATE}/postgres/data/postmaster.pid" ] && bin_pg="$(pg_bin)"; then
    runuser -u postgres -- "${bin_pg}/pg_ctl" -D "${STATE}/postgres/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  # Mounts under the state dir (pod volumes, container root filesystems, network namespaces), deepest first.
  while read -r m; do umount -l "${m}" 2>/dev/null || true; done < <(awk -v s="${STATE}/" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
  # Veths of the bridge go with their namespaces; then the bridge itself.
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then ip link del "${BRIDGE}"; fi
  if ip link show "${EXIT_LINK}" >/dev/null 2>&1; then ip link del "${EXIT_LINK}"; fi
  remove_kube_iptables
  # shellcheck disable=SC2086
  while iptables -D FORWARD ${BRIDGE_FORWARD_GUARD} 2>/dev/null; do :; done
  if [ -f "${STATE}/sysctl.saved" ]; then
    while IFS='=' read -r k v; do sysctl -qw "${k}=${v}" || true; done < "${STATE}/sysctl.saved"
  fi
  # Everything but the caches; the next `up` starts a fresh cluster.
  if [ -d "${STATE}" ]; then
    find "${STATE}" -mindepth 1 -maxdepth 1 ! -name keep -exec rm -rf {} +
    rm -rf "${KEEP}/containerd/state" "${KEEP}/cni"
  fi
  log "down in $(elapsed)"
}

# fresh: the machine as if it never ran a cluster, so that a cold `up` (containerd's first start
# on an empty store) can be tried at will: `down`, then the caches `down` keeps (containerd's
# content and metadata, the image stamps, the pause binary), the state directory itself, the
# pause image in podman's store, and what the runtime leaves outside the state directory (CNI's
# result cache of this network; runc's state and the shim sockets under /run/containerd, the
# kubelet's empty /var/lib/kubelet, both only when no other containerd or kubelet runs). The
# proxyfleet image stays (`npm run image` made it), and so do the Go tools.
cmd_fresh() {
  cmd_down
  rm -rf "${STATE}"
  if podman image exists "${PAUSE_IMAGE}" 2>/dev/null; then podman image rm -f "${PAUSE_IMAGE}" >/dev/null; fi
  rm -f /var/lib/cni/results/proxyfleet-cluster-* 2>/dev/null || true
  if ! pgrep -x containerd >/dev/null 2>&1; then rm -rf /run/containerd/runc/k8s.io /run/containerd/s; fi
  if ! pgrep -x kubelet >/dev/null 2>&1; then
    rmdir /var/lib/kubelet/device-plugins /var/lib/kubelet 2>/dev/null || true
  fi
  log "fresh in $(elapsed): ${STATE} and ${PAUSE_IMAGE} removed; the next up is a first one"
}

# kube-proxy --cleanup removes its chains; this removes any KUBE-* chain and rule it or the
# kubelet left (a crash, an older version), in every table.
remove_kube_iptables() {
  local t rule chain
  for t in filter nat mangle raw; do
    while read -r rule; do
      # shellcheck disable=SC2086
      [ -n "${rule}" ] && iptables -t "${t}" ${rule/-A /-D } 2>/dev/null || true
    done < <(iptables -t "${t}" -S 2>/dev/null | grep -E '^-A [A-Z-]+ .*-j KUBE-' | grep -vE '^-A KUBE-' || true)
    for chain in $(iptables -t "${t}" -S 2>/dev/null | awk '/^-N KUBE-/ { print $2 }'); do iptables -t "${t}" -F "${chain}" 2>/dev/null || true; done
    for chain in $(iptables -t "${t}" -S 2>/dev/null | awk '/^-N KUBE-/ { print $2 }'); do iptables -t "${t}" -X "${chain}" 2>/dev/null || true; done
  done
}

cmd_status() {
  local name match any=0
  for name in etcd:/etcd kube-apiserver:/kube-apiserver kube-controller-manager:/kube-controller-manager \
    kube-scheduler:/kube-scheduler kubelet:/kubelet kube-proxy:/kube-proxy metrics-server:/metrics-server "containerd:${STATE}/containerd.toml"; do
    match="${name#*:}"; name="${name%%:*}"
    if alive "${name}" "${match}"; then printf '%-24s running (pid %s)\n' "${name}" "$(pidof_component "${name}")"; any=1
    else printf '%-24s stopped\n' "${name}"; fi
  done
  if [ -f "${STATE}/postgres/data/postmaster.pid" ] && runuser -u postgres -- "$(pg_bin)/pg_ctl" -D "${STATE}/postgres/data" status >/dev/null 2>&1; then
    printf '%-24s running (127.0.0.1:%s, %s:%s)\n' postgresql "${PG_PORT}" "${NODE_IP}" "${PG_PORT}"; any=1
  else printf '%-24s stopped\n' postgresql; fi
  if ip link show "${BRIDGE}" >/dev/null 2>&1; then printf '%-24s %s %s\n' bridge "${BRIDGE}" "${POD_CIDR}"; any=1; else printf '%-24s absent\n' bridge; fi
  if ip link show "${EXIT_LINK}" >/dev/null 2>&1; then
    printf '%-24s %s %s\n' "exit addresses" "${EXIT_LINK}" "$(ip -4 -o addr show dev "${EXIT_LINK}" | awk '{ printf "%s ", $4 }')"
  fi
  if [ "${any}" = 1 ] && [ -f "${KUBECONFIG_FILE}" ]; then
    local bin; bin="${PROXYFLEET_TOOLS_BIN:-${HOME}/.cache/proxyfleet/tools/bin}"
    "${bin}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" get nodes 2>/dev/null || true
    "${bin}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" get pods -A 2>/dev/null || true
    printf 'kubeconfig: %s\n' "${KUBECONFIG_FILE}"
  fi
}

# One up or down at a time.
lock() { mkdir -p "${KEEP}"; exec 9>"${KEEP}/.lock"; if command -v flock >/dev/null 2>&1; then flock 9; fi; }

# Sourced (the tests of load_image), it only defines the functions.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi

case "${1:-}" in
  up) lock; cmd_up ;;
  down) lock; cmd_down ;;
  fresh) lock; cmd_fresh ;;
  status) cmd_status ;;
  *) die "usage: npm run cluster -- up|down|status|fresh" ;;
esac
