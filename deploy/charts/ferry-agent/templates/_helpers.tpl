{{/* The chart's name. */}}
{{- define "ferry-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's resources. */}}
{{- define "ferry-agent.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "ferry-agent.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "ferry-agent.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "ferry-agent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ferry-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ferry
{{- end }}

{{/* Labels selecting the hub's pods. */}}
{{- define "ferry-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ferry-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount's name. */}}
{{- define "ferry-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ferry-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference. */}}
{{- define "ferry-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}


{{/* rbac.executors entries without a namespace, as a JSON list: the
ClusterRole's resourceNames, valid in every namespace. */}}
{{- define "ferry-agent.executorNames" -}}
{{- $names := list }}
{{- range .Values.rbac.executors }}
{{- if not (contains "/" .) }}
{{- $names = append $names . }}
{{- end }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* rbac.executors entries NAMESPACE/NAME grouped by namespace, as a JSON
object of lists: one Role per namespace names them. */}}
{{- define "ferry-agent.executorsByNamespace" -}}
{{- $byNamespace := dict }}
{{- range .Values.rbac.executors }}
{{- if contains "/" . }}
{{- $parts := splitList "/" . }}
{{- $namespace := index $parts 0 }}
{{- $names := get $byNamespace $namespace | default list }}
{{- $_ := set $byNamespace $namespace (append $names (index $parts 1)) }}
{{- end }}
{{- end }}
{{- toJson $byNamespace }}
{{- end }}
