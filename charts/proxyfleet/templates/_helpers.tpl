{{- define "proxyfleet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "proxyfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/part-of: proxyfleet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" . "component" "api") */}}
{{- define "proxyfleet.selector" -}}
app.kubernetes.io/name: proxyfleet-{{ .component }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- end -}}

{{- define "proxyfleet.componentLabels" -}}
{{ include "proxyfleet.labels" .ctx }}
{{ include "proxyfleet.selector" . }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "proxyfleet.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "proxyfleet.databaseSecret" -}}
{{- .Values.database.existingSecret | default (printf "%s-database" (include "proxyfleet.fullname" .)) -}}
{{- end -}}

{{/* The key of the session URL in the database Secret ("" when the url serves the sessions too; docs/adr/0068). */}}
{{- define "proxyfleet.sessionSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.sessionSecretKey -}}
{{- else if .Values.database.sessionUrl -}}
{{- .Values.database.sessionSecretKey | default "sessionUrl" -}}
{{- end -}}
{{- end -}}

{{- define "proxyfleet.apiSecret" -}}
{{- .Values.apiSecrets.existingSecret | default (printf "%s-api" (include "proxyfleet.fullname" .)) -}}
{{- end -}}

{{/* The container security context every proxyfleet container runs with. */}}
{{- define "proxyfleet.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Environment every entrypoint shares: database URLs from the Secret, pod name, log level. */}}
{{- define "proxyfleet.commonEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "proxyfleet.databaseSecret" .ctx }}
      key: {{ .ctx.Values.database.secretKey }}
{{- with (include "proxyfleet.sessionSecretKey" .ctx) }}
- name: PROXYFLEET_DATABASE_SESSION_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "proxyfleet.databaseSecret" $.ctx }}
      key: {{ . }}
{{- end }}
{{- if eq .ctx.Values.database.pooling "transaction" }}
- name: PROXYFLEET_DB_POOLING
  value: transaction
{{- end }}
- name: PROXYFLEET_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: PROXYFLEET_LOG_LEVEL
  value: {{ .logLevel | quote }}
{{- end -}}

{{/*
Whether this release renders the CRD (dict "ctx" . "name" <crd name>): yes when the cluster does
not have it (or `helm template`, which looks nothing up) or when this release owns it. A CRD kept
by an uninstalled release (helm.sh/resource-policy: keep) or applied with kubectl is used as it is:
Helm would refuse to take it over. docs/adr/0067.
*/}}
{{- define "proxyfleet.rendersCrd" -}}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" .name -}}
{{- if not $crd -}}
true
{{- else -}}
{{- $a := $crd.metadata.annotations | default dict -}}
{{- if and (eq (get $a "meta.helm.sh/release-name") .ctx.Release.Name) (eq (get $a "meta.helm.sh/release-namespace") .ctx.Release.Namespace) -}}
true
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The optional PgBouncer's configuration (templates/pgbouncer.yaml; the settings of
docs/adr/0068-pgbouncer-transaction-pooling.md, which test/pgbouncer.ts runs in the tests).
*/}}
{{- define "proxyfleet.pgbouncerIni" -}}
{{- $c := .Values.pgbouncer -}}
{{- $server := printf "host=%s port=%d dbname=%s" $c.server.host (int $c.server.port) $c.server.database -}}
[databases]
proxyfleet = {{ $server }} pool_mode=transaction connect_query='SET statement_timeout = {{ int $c.statementTimeoutMs }}'
proxyfleet_session = {{ $server }} pool_mode=session

[pgbouncer]
listen_addr = 0.0.0.0
listen_port = 6432
unix_socket_dir =
auth_type = scram-sha-256
auth_file = /config/users.txt
pool_mode = transaction
default_pool_size = {{ int $c.poolSize }}
max_client_conn = {{ int $c.maxClientConn }}
server_login_retry = 1
server_connect_timeout = 5
query_wait_timeout = 5
log_connections = 0
log_disconnections = 0
{{- end -}}

{{/*
The example gateways' ports, by name (examples.yaml, and the gateways' helm test).
*/}}
{{- define "proxyfleet.examplePorts" -}}
{"basic": 12321, "advanced": 61236, "light": 10080}
{{- end }}

{{/*
The example gateways' edge: their Service (examples.serviceType, .externalTrafficPolicy) and the
PROXY protocol from the load balancer in front (examples.proxyProtocol; off by default).
*/}}
{{- define "proxyfleet.exampleEdge" -}}
{{- $e := .Values.examples -}}
{{- if ne $e.proxyProtocol.mode "off" }}
proxyProtocol:
  mode: {{ $e.proxyProtocol.mode }}
  trustedCidrs: {{ toJson $e.proxyProtocol.trustedCidrs }}
{{- end }}
service:
  type: {{ $e.serviceType }}
  {{- with $e.externalTrafficPolicy }}
  externalTrafficPolicy: {{ . }}
  {{- end }}
{{- end }}

{{/*
PROXYFLEET_RELAY_URL of the API pods and, through the controller, the gateway pods; empty when the
relay is off (docs/adr/0105). relay.address:
- dns (default): the relay Service's cluster DNS name (the gateways may run in other namespaces).
- serviceEnv: for a cluster without DNS, the Service's environment variables, which the kubelet
  expands in the API's and controller's env (they run in the release namespace with service links
  on; Helm creates Services before Deployments): {SVC}_SERVICE_HOST and
  {SVC}_SERVICE_PORT_{PORT NAME}, the names upper-cased with '-' as '_'. The controller hands the
  expanded value to the gateway pods. A pod that still sees `$(` refuses to start (common/src/config.ts).
*/}}
{{- define "proxyfleet.relayUrl" -}}
{{- if .Values.relay.enabled -}}
{{- $service := printf "%s-relay" (include "proxyfleet.fullname" .) -}}
{{- if eq .Values.relay.address "serviceEnv" -}}
{{- $var := $service | upper | replace "-" "_" -}}
ws://$({{ $var }}_SERVICE_HOST):$({{ $var }}_SERVICE_PORT_STREAM)/changes
{{- else -}}
ws://{{ $service }}.{{ .Release.Namespace }}.svc:8095/changes
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The pod template's metadata of one component, (dict "ctx" . "component" "api" "values" $c
["annotations" dict]): the chart's labels and annotations, then the values' podLabels and
podAnnotations. A key the chart sets is refused rather than dropped or overridden: the selector
labels tie the pods to their Deployment, Service and NetworkPolicy, and a silently ignored value
would leave the user wondering (as ProxyGateway's podLabels, ADR 0116).
*/}}
{{- define "proxyfleet.podMetadata" -}}
{{- $labels := include "proxyfleet.componentLabels" . | fromYaml -}}
{{- $annotations := deepCopy (.annotations | default dict) -}}
{{- range $k, $v := (.values.podLabels | default dict) -}}
{{- if hasKey $labels $k -}}
{{- fail (printf "%s.podLabels may not set %s: the chart sets it (its selector labels tie the pods to their Deployment, Service and NetworkPolicy)" $.component $k) -}}
{{- end -}}
{{- $_ := set $labels $k $v -}}
{{- end -}}
{{- range $k, $v := (.values.podAnnotations | default dict) -}}
{{- if hasKey $annotations $k -}}
{{- fail (printf "%s.podAnnotations may not set %s: the chart sets it" $.component $k) -}}
{{- end -}}
{{- $_ := set $annotations $k $v -}}
{{- end -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Where a component's pods run, the same knobs for every component the chart deploys, under the pod
spec (dict "ctx" . "component" "api" "values" $c): nodeSelector, tolerations, affinity,
topologySpreadConstraints (one without a labelSelector counts this component's pods, as a
ProxyGateway's does, ADR 0116) and priorityClassName.
*/}}
{{- define "proxyfleet.podPlacement" -}}
{{- $c := .values -}}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
{{- $selector := include "proxyfleet.selector" $ | fromYaml }}
topologySpreadConstraints:
  {{- range . }}
  {{- $constraint := deepCopy . }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
  {{- end }}
  - {{ toYaml $constraint | nindent 4 | trim }}
  {{- end }}
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* A component's extraEnv (EnvVar list), after the chart's own variables. */}}
{{- define "proxyfleet.extraEnv" -}}
{{- with .extraEnv }}
{{- toYaml . }}
{{- end }}
{{- end -}}
