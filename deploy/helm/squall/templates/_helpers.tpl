{{- define "squall.fullname" -}}
{{- printf "%s-squall" .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}

{{- define "squall.labels" -}}
app.kubernetes.io/name: squall
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "squall.image" -}}
{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end -}}

{{/* The Secret's files become /keys as squall expects them: 0600, owned
     by the pod's user, the public keys of peers under authorized/. */}}
{{- define "squall.keysInit" -}}
- name: keys
  image: {{ include "squall.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["sh", "-c"]
  args:
    - >-
      set -e; umask 077; mkdir -p /keys/authorized;
      cp /secret/broker.pub /keys/;
      for f in /secret/*.pub; do [ "$(basename "$f")" = broker.pub ] || cp "$f" /keys/authorized/; done;
      for f in broker.key governor.key http-token; do [ ! -f "/secret/$f" ] || cp "/secret/$f" /keys/; done
  volumeMounts:
    - {name: secret, mountPath: /secret, readOnly: true}
    - {name: keys, mountPath: /keys}
  securityContext:
    allowPrivilegeEscalation: false
{{- end -}}

{{- define "squall.keysVolumes" -}}
- name: secret
  secret:
    secretName: {{ required "auth.secretName: the Secret with squall's keys (README.md, Kubernetes)" .Values.auth.secretName }}
    defaultMode: 0400
- name: keys
  emptyDir:
    medium: Memory
{{- end -}}
