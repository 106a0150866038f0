{{/* Chart name, overridable with nameOverride. */}}
{{- define "phonebridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name: "<release>-<chart>" (or the release name alone when it already
contains the chart name). 57 characters at most, so "<fullname>-admin" fits in 63.
*/}}
{{- define "phonebridge.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 57 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 57 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 57 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of the Service that exposes /metrics, /healthz, /readyz. */}}
{{- define "phonebridge.adminServiceName" -}}
{{- printf "%s-admin" (include "phonebridge.fullname" .) }}
{{- end }}

{{/* "name-version" for the helm.sh/chart label. */}}
{{- define "phonebridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "phonebridge.labels" -}}
helm.sh/chart: {{ include "phonebridge.chart" . }}
{{ include "phonebridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: phonebridge
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels that select the gateway pods (immutable once installed). */}}
{{- define "phonebridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "phonebridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* ServiceAccount the pods run as. */}}
{{- define "phonebridge.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "phonebridge.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "phonebridge.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}

{{/*
publicUrl, validated: required, http(s), no trailing slash (the relay strips it too).
*/}}
{{- define "phonebridge.publicUrl" -}}
{{- $url := required "publicUrl is required: set it to the load balancer's public URL, the same for every node (e.g. --set publicUrl=https://relay.example.com)" .Values.publicUrl | toString | trimSuffix "/" }}
{{- if not (or (hasPrefix "https://" $url) (hasPrefix "http://" $url)) }}
{{- fail (printf "publicUrl must start with https:// or http://, got %q" $url) }}
{{- end }}
{{- $url }}
{{- end }}

{{/* The host of publicUrl (without port), for default Ingress rules. */}}
{{- define "phonebridge.publicHost" -}}
{{- $u := urlParse (include "phonebridge.publicUrl" .) }}
{{- regexReplaceAll ":[0-9]+$" (get $u "host") "" }}
{{- end }}

{{/* true when PHONEBRIDGE_TRUST_PROXY is on ("auto" = ingress.enabled). */}}
{{- define "phonebridge.trustProxy" -}}
{{- $v := .Values.trustProxy }}
{{- if or (eq (toString $v) "auto") (eq (toString $v) "") }}
{{- ternary "true" "false" (.Values.ingress.enabled | default false) }}
{{- else if or (eq (toString $v) "true") (eq (toString $v) "false") }}
{{- toString $v }}
{{- else }}
{{- fail (printf "trustProxy must be auto, true or false, got %q" (toString $v)) }}
{{- end }}
{{- end }}

{{/*
Where a URL Secret lives: {"name": …, "key": …}. Argument: dict "root" $ "cfg" .Values.database.
existingSecret wins; otherwise the chart's own Secret "<fullname>".
*/}}
{{- define "phonebridge.urlSecretRef" -}}
{{- $cfg := .cfg }}
{{- $name := $cfg.existingSecret | default (include "phonebridge.fullname" .root) }}
{{- $key := required "database.secretKey / redis.secretKey must not be empty" $cfg.secretKey }}
{{- dict "name" $name "key" $key | toJson }}
{{- end }}

{{/* true when the chart must create its Secret (a url is given without an existingSecret). */}}
{{- define "phonebridge.createSecret" -}}
{{- $db := and (not .Values.database.existingSecret) .Values.database.url }}
{{- $redis := and (not .Values.redis.existingSecret) .Values.redis.url }}
{{- if or $db $redis }}true{{ end }}
{{- end }}

{{/* Seconds of grace: ceil(drainMs / 1000) + preStop sleep + margin; always > drain. */}}
{{- define "phonebridge.terminationGracePeriodSeconds" -}}
{{- $drainMs := int64 .Values.drainMs }}
{{- if lt $drainMs 0 }}{{ fail "drainMs must be >= 0" }}{{ end }}
{{- $margin := int64 .Values.terminationGraceMarginSeconds }}
{{- if lt $margin 1 }}{{ fail "terminationGraceMarginSeconds must be >= 1 so the grace period exceeds the drain" }}{{ end }}
{{- $drainS := div (add $drainMs 999) 1000 }}
{{- add $drainS (int64 .Values.lifecycle.preStopSleepSeconds) $margin }}
{{- end }}

{{/* PromQL label matchers for this release's scraped admin endpoints. */}}
{{- define "phonebridge.promSelector" -}}
{{- printf "job=%q, namespace=%q" (include "phonebridge.adminServiceName" .) .Release.Namespace }}
{{- end }}

{{/*
Checks across values, run once from the Deployment. A chart-created Secret holds only the
URLs given as values, so the other URL must then come from an existingSecret too.
*/}}
{{- define "phonebridge.validate" -}}
{{- if include "phonebridge.createSecret" . }}
{{- range $name := list "database" "redis" }}
{{- $cfg := index $.Values $name }}
{{- if and (not $cfg.existingSecret) (not $cfg.url) }}
{{- fail (printf "%s: set %s.url or %s.existingSecret — the chart creates Secret %q from the other URL value, so it cannot also hold a %s URL you add by hand" $name $name $name (include "phonebridge.fullname" $) $name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.database.existingSecret .Values.database.url }}
{{- fail "database: set either database.existingSecret or database.url, not both" }}
{{- end }}
{{- if and .Values.redis.existingSecret .Values.redis.url }}
{{- fail "redis: set either redis.existingSecret or redis.url, not both" }}
{{- end }}
{{- with .Values.redis.url }}
{{- $pattern := dict "single" "^rediss?://" "sentinel" "^rediss?[+]sentinel://" "cluster" "^rediss?[+]cluster://" }}
{{- $label := dict "single" "redis:// or rediss://" "sentinel" "redis+sentinel:// or rediss+sentinel://" "cluster" "redis+cluster:// or rediss+cluster://" }}
{{- if not (regexMatch (get $pattern $.Values.redis.topology) .) }}
{{- fail (printf "redis: redis.topology is %s, so redis.url must start with %s" $.Values.redis.topology (get $label $.Values.redis.topology)) }}
{{- end }}
{{- end }}
{{- end }}
