{{- define "nettraffic.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "nettraffic.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "nettraffic.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "nettraffic.image" -}}
{{ required "image.repository is not set: no public image is published. Build the Dockerfile, push it to a registry your nodes pull from, and pass --set image.repository=REGISTRY/nettraffic (README, \"Install in a cluster\")" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "nettraffic.secretName" -}}
{{ .Values.certs.secretName | default (printf "%s-tls" (include "nettraffic.fullname" .)) }}
{{- end -}}

{{/* Restricted pod security for every pod of the chart. */}}
{{- define "nettraffic.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "nettraffic.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- /* The Lease that elects the replica writing the traffic-tier node labels. */}}
{{- define "nettraffic.tierLease" -}}
{{- printf "%s-tier-labels" (include "nettraffic.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{- /* The ValidatingAdmissionPolicy API this cluster serves: v1 from 1.30,
the beta only where it is switched on; empty: none (the policy is skipped). */}}
{{- define "nettraffic.policyApi" -}}
{{- if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}
admissionregistration.k8s.io/v1
{{- else if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy" -}}
admissionregistration.k8s.io/v1beta1
{{- end -}}
{{- end }}
