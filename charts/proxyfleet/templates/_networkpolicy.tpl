{{/*
Egress to the database, as JSON (a NetworkPolicyEgressRule list), for the chart's policies
(networkpolicies.yaml) and the operator's gateway policies (proxyfleet.gatewayNetworkPolicy):
PgBouncer's pods on 6432 when the chart runs it, the database where networkPolicy names it
(databaseCidrs, databaseSelectors on databasePort), and with neither the port to any address
(docs/adr/0120). (dict "ctx" . "qualify" bool): qualify, for pods outside the release namespace,
gives each pod peer without a namespaceSelector the release namespace's, where its pods are.
*/}}
{{- define "proxyfleet.databaseEgress" -}}
{{- $ctx := .ctx }}
{{- $np := $ctx.Values.networkPolicy }}
{{- $release := dict "matchLabels" (dict "kubernetes.io/metadata.name" $ctx.Release.Namespace) }}
{{- $database := list }}
{{- range $np.databaseCidrs }}
{{- $database = append $database (dict "ipBlock" (dict "cidr" .)) }}
{{- end }}
{{- range $np.databaseSelectors }}
{{- $peer := deepCopy . }}
{{- if and $.qualify (hasKey $peer "podSelector") (not (hasKey $peer "namespaceSelector")) }}
{{- $_ := set $peer "namespaceSelector" $release }}
{{- end }}
{{- $database = append $database $peer }}
{{- end }}
{{- $ports := list (dict "protocol" "TCP" "port" (int $np.databasePort)) }}
{{- $rules := list }}
{{- if $ctx.Values.pgbouncer.enabled }}
{{- /* Through the chart's PgBouncer; straight to the database only where the values name it (a direct session URL). */}}
{{- $pgbouncer := dict "podSelector" (dict "matchLabels" (include "proxyfleet.selector" (dict "ctx" $ctx "component" "pgbouncer") | fromYaml)) }}
{{- if .qualify }}
{{- $_ := set $pgbouncer "namespaceSelector" $release }}
{{- end }}
{{- $rules = append $rules (dict "to" (list $pgbouncer) "ports" (list (dict "protocol" "TCP" "port" 6432))) }}
{{- if $database }}
{{- $rules = append $rules (dict "to" $database "ports" $ports) }}
{{- end }}
{{- else if $database }}
{{- $rules = append $rules (dict "to" $database "ports" $ports) }}
{{- else }}
{{- /* Nothing says where the database is: its port, to any address. */}}
{{- $rules = append $rules (dict "ports" $ports) }}
{{- end }}
{{- toJson $rules }}
{{- end -}}

{{/*
The controller's PROXYFLEET_GATEWAY_NETWORK_POLICY (controllers/src/proxygateway/network-policy.ts):
the egress rules only the chart knows, peers qualified with the release namespace since gateways
run in any namespace (the database or PgBouncer, the relay's stream, extraEgress), the cluster's
ranges the internet egress leaves out, and who may reach the health port. The operator adds the
public port, DNS, the internet and controller.gatewayAllowCidrs.
*/}}
{{- define "proxyfleet.gatewayNetworkPolicy" -}}
{{- $g := .Values.controller.gatewayNetworkPolicy }}
{{- $egress := include "proxyfleet.databaseEgress" (dict "ctx" . "qualify" true) | fromJsonArray }}
{{- if .Values.relay.enabled }}
{{- $relay := dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .Release.Namespace)) "podSelector" (dict "matchLabels" (include "proxyfleet.selector" (dict "ctx" . "component" "relay") | fromYaml)) }}
{{- $egress = append $egress (dict "to" (list $relay) "ports" (list (dict "protocol" "TCP" "port" 8095))) }}
{{- end }}
{{- toJson (dict "egress" (concat $egress $g.extraEgress) "clusterCidrs" $g.clusterCidrs "healthFrom" $g.healthFrom) }}
{{- end -}}
