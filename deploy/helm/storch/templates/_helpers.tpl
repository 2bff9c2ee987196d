{{/* Names and labels shared by every template. */}}

{{- define "storch.fullname" -}}
{{ .Release.Name }}
{{- end }}

{{/* Cluster-scoped objects are named after the release and its namespace. */}}
{{- define "storch.clusterName" -}}
{{ .Release.Name }}-{{ .Release.Namespace }}
{{- end }}

{{- define "storch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "storch.labels" -}}
{{ include "storch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}
