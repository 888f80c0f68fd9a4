{{/* The labels of every object; the selector is the first one alone. */}}
{{- define "informer-host.labels" -}}
app.kubernetes.io/name: informer-host
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/*
The config.yaml of a config, a mode and its settings (dict: config, mode,
leaderElection, sharding): config with the mode's block added. Called for
the release's values and for the chart's defaults, so the RBAC check below
compares like with like.
*/}}
{{- define "informer-host.modeConfig" -}}
{{- $c := deepCopy .config -}}
{{- if or (hasKey $c "leaderElection") (hasKey $c "sharding") -}}
{{- fail "config: leave leaderElection and sharding out; set mode (leaderElection or sharding) and its values instead" -}}
{{- end -}}
{{- if eq .mode "leaderElection" -}}
{{- $_ := set $c "leaderElection" (dict "enabled" true "leaseName" .leaderElection.leaseName) -}}
{{- else if eq .mode "sharding" -}}
{{- $_ := set $c "sharding" (dict "enabled" true "leasePrefix" .sharding.leasePrefix "key" .sharding.key) -}}
{{- else -}}
{{- fail (printf "mode: %q is neither leaderElection nor sharding" .mode) -}}
{{- end -}}
{{- toYaml $c -}}
{{- end }}

{{- define "informer-host.config" -}}
{{- include "informer-host.modeConfig" (dict "config" .Values.config "mode" .Values.mode "leaderElection" .Values.leaderElection "sharding" .Values.sharding) -}}
{{- end }}

{{/* The port of config.server.address (":9090" -> 9090). */}}
{{- define "informer-host.port" -}}
{{- regexReplaceAll "^.*:" (.Values.config.server.address | default ":9090") "" -}}
{{- end }}

{{/* A path of the config relative to /etc/informer-host, where the config volume is. */}}
{{- define "informer-host.configRelative" -}}
{{- $p := trimPrefix "/etc/informer-host/" . -}}
{{- if isAbs $p -}}
{{- fail (printf "%s: the chart mounts registry credentials under /etc/informer-host: name a path relative to it (registry/config.json)" .) -}}
{{- end -}}
{{- $p -}}
{{- end }}
