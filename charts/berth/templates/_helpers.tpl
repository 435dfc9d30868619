{{/* Names, labels and shared pieces of the berth chart. */}}

{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name: the release name, with the chart name unless it holds it. */}}
{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "berth.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "berth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: include "berth.selectorLabels" (list . "scheduler") */}}
{{- define "berth.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "berth.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "berth.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The kube-scheduler tag: scheduler.image.tag, else the cluster's version as an upstream tag
(v1.36.3 of v1.36.3-eks-a737599 or v1.36.3+k3s1; a pre-release such as v1.38.0-beta.0 is kept).
Rendered without a cluster (helm template: lookup finds nothing) and without --kube-version, the
version is helm's own default (vX.Y.0 of the Kubernetes libraries helm was built with), not the
cluster's, and may be newer than its API server: the render fails, saying what to pass. */}}
{{- define "berth.schedulerTag" -}}
{{- if .Values.scheduler.image.tag -}}
{{- .Values.scheduler.image.tag -}}
{{- else -}}
{{- $version := .Capabilities.KubeVersion.Version -}}
{{- $offline := not (lookup "v1" "Namespace" "" "kube-system") -}}
{{- if and $offline (regexMatch "^v?[0-9]+\\.[0-9]+\\.0$" $version) -}}
{{- fail (printf "scheduler.image.tag: rendered without a cluster, the Kubernetes version is helm's own default (%s), not your cluster's, and kube-scheduler must never be newer than the API server: pass --kube-version with your API server's version (kubectl version), or --set scheduler.image.tag=<that version>" $version) -}}
{{- end -}}
{{- $tag := regexFind "^[0-9]+\\.[0-9]+\\.[0-9]+(-(alpha|beta|rc)\\.[0-9]+)?" (trimPrefix "v" $version) -}}
{{- printf "v%s" (required (printf "scheduler.image.tag: the cluster's version %q is no Kubernetes release tag; set scheduler.image.tag" $version) $tag) -}}
{{- end -}}
{{- end -}}

{{- define "berth.schedulerName" -}}{{ include "berth.fullname" . }}-scheduler{{- end -}}
{{- define "berth.operatorName" -}}{{ include "berth.fullname" . }}-operator{{- end -}}
{{- define "berth.peeringName" -}}{{ default (include "berth.fullname" .) .Values.operator.peering.name }}{{- end -}}
{{- define "berth.webhookServiceName" -}}{{ include "berth.fullname" . }}-operator-webhook{{- end -}}

{{/* The certificate source of the webhook: certManager, generated or secret. */}}
{{- define "berth.certMode" -}}
{{- $mode := .Values.webhook.certificate.mode -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1" -}}certManager{{- else -}}generated{{- end -}}
{{- else -}}
{{- $mode -}}
{{- end -}}
{{- end -}}

{{- define "berth.webhookSecretName" -}}
{{- if eq (include "berth.certMode" .) "secret" -}}
{{- required "webhook.certificate.secretName is required with webhook.certificate.mode secret" .Values.webhook.certificate.secretName -}}
{{- else -}}
{{- include "berth.fullname" . }}-webhook-tls
{{- end -}}
{{- end -}}

{{/* A preferred anti-affinity spreading one component's replicas over nodes. */}}
{{- define "berth.spreadAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "berth.selectorLabels" . | nindent 12 }}
{{- end -}}

{{/* The scheduler configuration: the one source of manifests/scheduler/scheduler-config.yaml. */}}
{{- define "berth.schedulerConfig" -}}
# The configuration of the second scheduler, {{ .Values.scheduler.name }}, with berth's extender beside it on loopback.
# Pods opt in with `spec.schedulerName: {{ .Values.scheduler.name }}`.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.scheduler.leaderElection.enabled }}
  resourceLock: leases
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: {{ .Values.scheduler.name }}
  leaseDuration: {{ .Values.scheduler.leaderElection.leaseDuration }}
  renewDeadline: {{ .Values.scheduler.leaderElection.renewDeadline }}
  retryPeriod: {{ .Values.scheduler.leaderElection.retryPeriod }}
# kube-scheduler's sample of the feasible nodes (0: its adaptive default). berth decides a pod over the
# sample; a pod whose berth rules only a few nodes meet is handed over to a node outside it (berth serve
# --kube-sample, rendered from the same value).
percentageOfNodesToScore: {{ .Values.scheduler.percentageOfNodesToScore }}
profiles:
  - schedulerName: {{ .Values.scheduler.name }}
    plugins:
      # berth ranks the nodes: its first choice is the node that gets the pod, so the placement it
      # reserves for the next pod of a burst is the one that happens.
      score:
        disabled:
          - name: "*"
  {{- if .Values.scheduler.exhaustiveProfile }}
  # Every node for every pod, at the cost of a filter pass over all of them: for workloads made of
  # rules few nodes meet (docs/extender.md, "percentageOfNodesToScore").
  - schedulerName: {{ .Values.scheduler.name }}-exhaustive
    percentageOfNodesToScore: 100
    plugins:
      score:
        disabled:
          - name: "*"
  {{- end }}
extenders:
  - urlPrefix: "http://127.0.0.1:{{ .Values.extender.port }}"
    filterVerb: filter
    prioritizeVerb: prioritize
    bindVerb: bind
    # Preemption asks berth about kube's candidates: berth drops the nodes its rules would still refuse
    # and adds the lower-priority pods that block only under its rules as victims.
    preemptVerb: preempt
    weight: 1
    nodeCacheCapable: true
    # A filter that times out fails the pod's scheduling attempt; berth answers in milliseconds.
    httpTimeout: {{ .Values.extender.httpTimeout }}
    enableHTTPS: false
    ignorable: false
{{- end -}}

{{/* The allocator configuration file (berth serve --config). */}}
{{- define "berth.allocatorConfig" -}}
{{- $config := .Values.allocator.config -}}
{{- if kindIs "string" $config -}}
{{- $config -}}
{{- else -}}
{{- toYaml $config -}}
{{- end -}}
{{- end -}}


{{/* berth serve --kube-sample: each profile's percentageOfNodesToScore, as the scheduler configuration sets it. */}}
{{- define "berth.kubeSample" -}}
{{ .Values.scheduler.name }}={{ .Values.scheduler.percentageOfNodesToScore }}
{{- if .Values.scheduler.exhaustiveProfile }},{{ .Values.scheduler.name }}-exhaustive=100{{ end }}
{{- end -}}
