{{/*
Every pair of workloads' bytes/s from the flow source (peers.*), one series
per (source end, destination end), and per way with peers.bytesEachWay
(nettraffic_way: to-callee, the request bytes, or to-caller; Istio and
Linkerd), uncapped: the expression the learner
otherwise computes at each read (kubectl_nettraffic/learning/peer_traffic.py,
pair_rates; tests/test_chart.py holds the two equal for every source). The
learner reads each end's busiest pairs from the recorded series
(peers.recordingRule; docs/operations.md, "Reading the pairs at scale").
*/}}

{{/* peers.cluster as a matcher ("" for none): label="value". */}}
{{- define "nettraffic.pairsCluster" -}}
{{- with .Values.peers.cluster -}}
{{- $parts := splitn "=" 2 . -}}
{{ $parts._0 }}={{ toJson $parts._1 }}
{{- end -}}
{{- end -}}

{{- define "nettraffic.pairsExpr" -}}
{{- $peers := .Values.peers -}}
{{- $window := .Values.prometheus.window -}}
{{- $cluster := include "nettraffic.pairsCluster" . -}}
{{- /* Without peers.cluster the source's own cluster label stays in the sum,
so that the series of several clusters are told apart (and left out). */ -}}
{{- $unselected := "" -}}
{{- if not $peers.cluster -}}
{{- $unselected = get (dict "istio" "source_cluster" "beyla" "k8s_cluster_name" "obi" "k8s_cluster_name") $peers.source -}}
{{- end -}}
{{- if eq $peers.source "istio" -}}
{{- /* An ambient waypoint's series name the ends ztunnel's legs hide. */ -}}
{{- $reporters := ternary $peers.reporter (printf "%s|waypoint" $peers.reporter) (eq $peers.reporter "waypoint") -}}
{{- $matchers := printf "reporter=~%q" $reporters -}}
{{- if $cluster }}{{ $matchers = printf "%s, %s" $matchers $cluster }}{{ end -}}
{{- $by := "source_workload, source_workload_namespace, destination_workload, destination_workload_namespace" -}}
{{- if $unselected }}{{ $by = printf "%s, %s" $by $unselected }}{{ end -}}
{{- $parts := list -}}
{{- $ways := dict "istio_tcp_sent_bytes_total" "to-caller" "istio_tcp_received_bytes_total" "to-callee" "istio_request_bytes_sum" "to-callee" "istio_response_bytes_sum" "to-caller" -}}
{{- range list "istio_tcp_sent_bytes_total" "istio_tcp_received_bytes_total" "istio_request_bytes_sum" "istio_response_bytes_sum" -}}
{{- $part := printf "label_replace(sum by (%s) (rate(%s{%s}[%s])), \"nettraffic_part\", %q, \"\", \"\")" $by . $matchers $window . -}}
{{- if $peers.bytesEachWay }}{{ $part = printf "label_replace(%s, \"nettraffic_way\", %q, \"\", \"\")" $part (get $ways .) }}{{ end -}}
{{- $parts = append $parts $part -}}
{{- end -}}
sum by ({{ $by }}{{ if $peers.bytesEachWay }}, nettraffic_way{{ end }}) ({{ join " or " $parts }})
{{- else if eq $peers.source "linkerd" -}}
{{- $kinds := list "deployment" "statefulset" "daemonset" "replicaset" "k8s_job" "cronjob" "replicationcontroller" -}}
{{- $dstKinds := list -}}
{{- range $kinds }}{{ $dstKinds = append $dstKinds (printf "dst_%s" .) }}{{ end -}}
{{- $matchers := "direction=\"outbound\", peer=\"dst\"" -}}
{{- if $cluster }}{{ $matchers = printf "%s, %s" $matchers $cluster }}{{ end -}}
{{- $by := join ", " (concat (list "namespace" "dst_namespace") $kinds $dstKinds) -}}
{{- $parts := list -}}
{{- $ways := dict "tcp_write_bytes_total" "to-callee" "tcp_read_bytes_total" "to-caller" -}}
{{- range list "tcp_write_bytes_total" "tcp_read_bytes_total" -}}
{{- $rates := printf "sum by (%s) (rate(%s{%s}[%s]))" $by . $matchers $window -}}
{{- /* The kinds' labels coalesced into one per end. */ -}}
{{- range $kinds }}{{ $rates = printf "label_replace(%s, \"nettraffic_source_workload\", \"$1\", %q, \"(.+)\")" $rates . }}{{ end -}}
{{- range $dstKinds }}{{ $rates = printf "label_replace(%s, \"nettraffic_destination_workload\", \"$1\", %q, \"(.+)\")" $rates . }}{{ end -}}
{{- $part := printf "label_replace(%s, \"nettraffic_part\", %q, \"\", \"\")" $rates . -}}
{{- if $peers.bytesEachWay }}{{ $part = printf "label_replace(%s, \"nettraffic_way\", %q, \"\", \"\")" $part (get $ways .) }}{{ end -}}
{{- $parts = append $parts $part -}}
{{- end -}}
sum by (nettraffic_source_workload, namespace, nettraffic_destination_workload, dst_namespace{{ if $peers.bytesEachWay }}, nettraffic_way{{ end }}) ({{ join " or " $parts }})
{{- else if or (eq $peers.source "beyla") (eq $peers.source "obi") -}}
{{- $by := printf "k8s_src_owner_name, k8s_src_namespace, k8s_dst_owner_name, k8s_dst_namespace, k8s_src_owner_type, k8s_dst_owner_type, %s_ip, k8s_src_node_ip" $peers.source -}}
{{- if $unselected }}{{ $by = printf "%s, %s" $by $unselected }}{{ end -}}
sum by ({{ $by }}) (rate({{ $peers.source }}_network_flow_bytes_total{ {{- $cluster -}} }[{{ $window }}]))
{{- else if eq $peers.source "query" -}}
{{ $peers.query }}
{{- end -}}
{{- end -}}

{{/* The rule group (one entry of a PrometheusRule's spec.groups), where
peers.recordingRule is on and there is a flow source. */}}
{{- define "nettraffic.pairsGroup" -}}
{{- $expr := include "nettraffic.pairsExpr" . -}}
{{- if and .Values.peers.recordingRule.enabled $expr -}}
- name: nettraffic-pairs
  interval: {{ .Values.peers.recordingRule.interval }}
  rules:
    - record: nettraffic:workload_pairs:bytes_per_second
      expr: {{ $expr | quote }}
{{- end -}}
{{- end -}}
