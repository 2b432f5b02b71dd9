{{/*
Each node's network utilisation, 0 to 1, labelled instance=<node name>, as
the webhook scores it (kubectl_nettraffic/sources/prometheus.py and
scoring/node_scores.py): per exporter, the selected devices' rates summed; per node, the
highest of its exporters (two exporters on one node measure the same NIC);
the busiest selected direction over the link speed. A node whose link speed
is unknown is measured against the slowest speed known in the cluster, as
scoring.mode link-utilization does. Values above 1 (bursts over the reported
speed) are clamped to 1, because the descheduler refuses a sample outside
0..1 (usageclients.go, prometheusUsageClient.sync).
*/}}

{{/* The label selector of node_exporter's network series, from prometheus.device*. */}}
{{- define "nettraffic.deviceSelector" -}}
{{- $m := list -}}
{{- with .Values.prometheus.deviceExclude }}{{ $m = append $m (printf "device!~%s" (toJson .)) }}{{ end -}}
{{- with .Values.prometheus.deviceInclude }}{{ $m = append $m (printf "device=~%s" (toJson .)) }}{{ end -}}
{{ printf "{%s}" (join "," $m) }}
{{- end -}}

{{/* Grouping of exporter-level series: prometheus.nodeMatch label:<name> keeps that label too. */}}
{{- define "nettraffic.exporterGroup" -}}
{{- $match := .Values.prometheus.nodeMatch -}}
{{- if hasPrefix "label:" $match -}}{{ trimPrefix "label:" $match }}, instance, job{{- else -}}instance, job{{- end -}}
{{- end -}}

{{/* (dict "root" $ "expr" EXPRESSION): an exporter-level expression (labels
instance, job) made one series per node, labelled instance=<node name>. */}}
{{- define "nettraffic.perNode" -}}
{{- $match := .root.Values.prometheus.nodeMatch -}}
{{- if eq $match "uname" -}}
max by (instance) (label_replace(max by (nodename) ({{ .expr }} * on (instance) group_left (nodename) max by (instance, nodename) (node_uname_info)), "instance", "$1", "nodename", "(.*)"))
{{- else if eq $match "internal-ip" -}}
{{- /* kube-state-metrics' kube_node_info carries each node's internal_ip; the
exporter's instance is host:port, [v6]:port or a bare host. */ -}}
max by (instance) (label_replace(max by (node) (label_replace({{ .expr }}, "internal_ip", "$1$2$3", "instance", "\\[(.*)\\]:[0-9]+|([^:]*):[0-9]+|(.*)") * on (internal_ip) group_left (node) max by (internal_ip, node) (kube_node_info)), "instance", "$1", "node", "(.*)"))
{{- else -}}
{{- $label := trimPrefix "label:" $match -}}
max by (instance) (label_replace(max by ({{ $label }}) ({{ .expr }}), "instance", "$1", "{{ $label }}", "(.*)"))
{{- end -}}
{{- end -}}

{{/* Each node's busiest selected direction, bytes/s (prometheus.direction). */}}
{{- define "nettraffic.busiestExpr" -}}
{{- $selector := include "nettraffic.deviceSelector" . -}}
{{- $group := include "nettraffic.exporterGroup" . -}}
{{- $window := .Values.prometheus.window -}}
{{- $rx := include "nettraffic.perNode" (dict "root" . "expr" (printf "sum by (%s) (rate(node_network_receive_bytes_total%s[%s]))" $group $selector $window)) -}}
{{- $tx := include "nettraffic.perNode" (dict "root" . "expr" (printf "sum by (%s) (rate(node_network_transmit_bytes_total%s[%s]))" $group $selector $window)) -}}
{{- $direction := .Values.prometheus.direction -}}
{{- if eq $direction "receive" -}}{{ $rx }}
{{- else if eq $direction "transmit" -}}{{ $tx }}
{{- else -}}
{{- /* The two directions get a label each, or "or" would keep only the first. */ -}}
max by (instance) (label_replace({{ $rx }}, "direction", "receive", "", "") or label_replace({{ $tx }}, "direction", "transmit", "", ""))
{{- end -}}
{{- end -}}

{{/* Each node's link speed, bytes/s, over the selected devices that report one. */}}
{{- define "nettraffic.speedExpr" -}}
{{- $selector := include "nettraffic.deviceSelector" . -}}
{{- $group := include "nettraffic.exporterGroup" . -}}
{{- include "nettraffic.perNode" (dict "root" . "expr" (printf "sum by (%s) (node_network_speed_bytes%s > 0)" $group $selector)) -}}
{{- end -}}

{{/* A DeschedulerPolicy (descheduler/v1alpha2) without apiVersion and kind,
as the descheduler chart's deschedulerPolicy value takes it. Each field's
comment names the descheduler type, and its file, that defines it. */}}
{{- define "nettraffic.deschedulerPolicy" -}}
{{- $policy := .Values.rebalancing.deschedulerPolicy -}}
{{- $url := $policy.prometheusUrl | default .Values.prometheus.url -}}
{{- if not $url -}}
{{- fail "rebalancing.deschedulerPolicy.enabled needs the Prometheus the descheduler queries: set rebalancing.deschedulerPolicy.prometheusUrl or prometheus.url" -}}
{{- end -}}
{{- $version := $policy.deschedulerVersion | toString -}}
{{- if not (and (regexMatch "^v[0-9]+[.][0-9]+[.][0-9]+$" $version) (semverCompare "~0.34.0 || >=0.36.0" $version)) -}}
{{- fail (printf "rebalancing.deschedulerPolicy.deschedulerVersion %q: this policy runs on kubernetes-sigs/descheduler v0.34.x or v0.36.0 and later, named like v0.36.0 (v0.33 refuses a Prometheus URL that is not https; v0.35.0 and v0.35.1 exit at start-up when the Prometheus client uses the pod's own token); set v0.36.0" $version) -}}
{{- end -}}
{{- if ge (float64 $policy.lowThreshold) (float64 $policy.highThreshold) -}}
{{- fail (printf "rebalancing.deschedulerPolicy.lowThreshold (%v) must be below highThreshold (%v): nodes between them are left alone" $policy.lowThreshold $policy.highThreshold) -}}
{{- end -}}
# Field names as kubernetes-sigs/descheduler defines them:
metricsProviders:                    # DeschedulerPolicy, pkg/api/v1alpha2/types.go
  - source: Prometheus               # MetricsProvider, pkg/api/v1alpha2/types.go
    prometheus:
      url: {{ $url | quote }}        # Prometheus, pkg/api/v1alpha2/types.go
      {{- with $policy.prometheusAuthTokenSecret }}{{ if .name }}
      authToken:                     # AuthToken, pkg/api/v1alpha2/types.go
        secretReference:             # SecretReference: key prometheusAuthToken
          namespace: {{ .namespace | quote }}
          name: {{ .name | quote }}
      {{- end }}{{ end }}
maxNoOfPodsToEvictPerNode: {{ $policy.evictionsPerNode }}  # DeschedulerPolicy, pkg/api/v1alpha2/types.go
profiles:                            # DeschedulerProfile, pkg/api/v1alpha2/types.go
  - name: nettraffic-rebalancing
    pluginConfig:                    # PluginConfig, pkg/api/v1alpha2/types.go
      - name: DefaultEvictor
        args:                        # DefaultEvictorArgs, pkg/framework/plugins/defaultevictor/types.go
          minPodAge: {{ $policy.minPodAge | quote }}
          minReplicas: 2
          nodeFit: true
      - name: LowNodeUtilization
        args:                        # LowNodeUtilizationArgs, pkg/framework/plugins/nodeutilization/types.go
          thresholds:                # ResourceThresholds, pkg/api/types.go
            MetricResource: {{ $policy.lowThreshold }}
          targetThresholds:
            MetricResource: {{ $policy.highThreshold }}
          metricsUtilization:        # MetricsUtilization, pkg/framework/plugins/nodeutilization/types.go
            source: Prometheus
            prometheus:              # Prometheus, pkg/framework/plugins/nodeutilization/types.go
              query: nettraffic:node_network_utilization:ratio
          evictableNamespaces:       # Namespaces, pkg/api/types.go
            exclude: {{- toYaml (uniq (append (without ($policy.excludedNamespaces | default list) "") .Release.Namespace)) | nindent 14 }}
          evictionLimits:            # EvictionLimits, pkg/api/types.go
            node: {{ $policy.evictionsPerNode }}
    plugins:                         # Plugins and PluginSet, pkg/api/v1alpha2/types.go
      filter:
        enabled: [DefaultEvictor]
      preevictionfilter:
        enabled: [DefaultEvictor]
      balance:
        enabled: [LowNodeUtilization]
{{- end -}}

{{/* The rule group the descheduler reads (docs/operations.md, "Rebalancing"),
as one entry of a PrometheusRule's spec.groups. No node is left out for an
unknown link speed: the descheduler skips its whole cycle when a node has
no sample. */}}
{{- define "nettraffic.rebalancingGroup" -}}
- name: nettraffic-rebalancing
  {{- with .Values.rebalancing.interval }}
  interval: {{ . }}
  {{- end }}
  rules:
    - record: nettraffic:node_network_busiest:bytes_per_second
      expr: {{ include "nettraffic.busiestExpr" . | quote }}
    - record: nettraffic:node_network_speed:bytes
      expr: {{ include "nettraffic.speedExpr" . | quote }}
    # Unknown link speed: the slowest known one. Above 1 (a burst over the
    # reported speed): 1, since the descheduler rejects samples outside 0..1.
    # No speed known anywhere: no sample (NaN fails ">= 0"), and the
    # descheduler skips its cycle rather than act on nonsense.
    - record: nettraffic:node_network_utilization:ratio
      expr: >-
        clamp_max(
          nettraffic:node_network_busiest:bytes_per_second
            / on (instance) nettraffic:node_network_speed:bytes
          or nettraffic:node_network_busiest:bytes_per_second
            / scalar(min(nettraffic:node_network_speed:bytes)),
          1
        ) >= 0
{{- end -}}
