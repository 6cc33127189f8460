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

{{/* The broker's Secret (auth.secretName) becomes /keys as squall expects
     it: 0600, owned by the pod's user, the public keys of its clients and
     governors under authorized/. Only the broker's pod reads it. */}}
{{- define "squall.brokerKeysInit" -}}
- name: keys
  image: {{ include "squall.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["sh", "-c"]
  args:
    - >-
      set -e; umask 077; mkdir -p /keys/authorized;
      cp /secret/broker.key /secret/broker.pub /keys/;
      for f in /secret/*.pub; do [ "$(basename "$f")" = broker.pub ] || cp "$f" /keys/authorized/; done;
      [ ! -f /secret/http-token ] || cp /secret/http-token /keys/
  volumeMounts:
    - {name: secret, mountPath: /secret, readOnly: true}
    - {name: keys, mountPath: /keys}
  securityContext:
    allowPrivilegeEscalation: false
{{- end -}}

{{/* One governor, one identity (docs/security.md): a governor pod's init
     container takes from the governors' Secret (auth.governorSecretName)
     the key of its own ordinal, governor-N.key, and broker.pub, nothing
     else; the governor container never mounts the Secret. */}}
{{- define "squall.governorKeysInit" -}}
- name: keys
  image: {{ include "squall.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["sh", "-c"]
  args:
    - >-
      set -e; umask 077; n="${POD_NAME##*-}";
      if [ ! -f "/secret/governor-$n.key" ]; then
      echo "no governor-$n.key in Secret {{ .Values.auth.governorSecretName }}: one key per governor replica (README.md, Kubernetes)" >&2; exit 1; fi;
      cp "/secret/governor-$n.key" /keys/governor.key; cp /secret/broker.pub /keys/broker.pub
  env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
  volumeMounts:
    - {name: secret, mountPath: /secret, readOnly: true}
    - {name: keys, mountPath: /keys}
  securityContext:
    allowPrivilegeEscalation: false
{{- end -}}

{{/* The Secret (the dict's secretName and what to say when it is missing)
     and the in-memory /keys it is copied into. */}}
{{- define "squall.keysVolumes" -}}
- name: secret
  secret:
    secretName: {{ required .missing .secretName }}
    defaultMode: 0400
- name: keys
  emptyDir:
    medium: Memory
{{- end -}}

{{/* A local client's containers (templates/client.yaml): the governors'
     user, so that their sockets take its files. Root (governors.taskUids
     not "none") with no capability and no escalation: it reads only what
     is its own; else the pod's user, as the governors. */}}
{{- define "squall.localClientSecurity" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
{{- if . }}
runAsUser: 0
runAsGroup: 0
runAsNonRoot: false
{{- end }}
{{- end -}}
