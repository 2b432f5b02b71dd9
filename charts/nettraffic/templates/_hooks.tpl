{{- /* A hook Job running kubectl-nettraffic with "args" as "account", from
dict: root, name, account, hook, container, component, args. */}}
{{- define "nettraffic.hookJob" -}}
{{- $ := .root -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .name }}
  namespace: {{ $.Release.Namespace }}
  labels: {{- include "nettraffic.labels" $ | nindent 4 }}
  annotations:
    helm.sh/hook: {{ .hook }}
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: 3
  ttlSecondsAfterFinished: 300
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ $.Chart.Name }}
        app.kubernetes.io/instance: {{ $.Release.Name }}
        app.kubernetes.io/component: {{ .component }}
    spec:
      restartPolicy: OnFailure
      serviceAccountName: {{ .account }}
      automountServiceAccountToken: true  # it talks to the API server
      securityContext: {{- include "nettraffic.podSecurityContext" $ | nindent 8 }}
      {{- with $.Values.imagePullSecrets }}
      imagePullSecrets: {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: {{ .container }}
          image: {{ include "nettraffic.image" $ }}
          imagePullPolicy: {{ $.Values.image.pullPolicy }}
          command: [kubectl-nettraffic]
          args: {{- toYaml .args | nindent 12 }}
          resources:
            requests: {cpu: 10m, memory: 64Mi}
            limits: {memory: 128Mi}
          securityContext: {{- include "nettraffic.containerSecurityContext" $ | nindent 12 }}
{{- end }}

{{- /* Annotations of a hook's own RBAC objects: made before its Job, gone after. */}}
{{- define "nettraffic.hookRbacAnnotations" -}}
helm.sh/hook: {{ . }}
helm.sh/hook-weight: "-10"
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
