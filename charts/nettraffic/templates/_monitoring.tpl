{{/* The label selector of this release's /metrics series, as the
ServiceMonitor's scrape labels them (job is the Service's name). */}}
{{- define "nettraffic.metricsSelector" -}}
job="{{ include "nettraffic.fullname" . }}",namespace="{{ .Release.Namespace }}"
{{- end -}}
