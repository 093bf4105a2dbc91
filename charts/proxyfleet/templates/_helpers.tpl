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

{{/* Environment every entrypoint shares: database URL from the Secret, pod name, log level. */}}
{{- define "proxyfleet.commonEnv" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "proxyfleet.databaseSecret" .ctx }}
      key: {{ .ctx.Values.database.secretKey }}
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
