{{/* Names and labels shared by every template. */}}

{{- define "storch.fullname" -}}
{{ .Release.Name }}
{{- end }}

{{/* Cluster-scoped objects are named after the release and its namespace. */}}
{{- define "storch.clusterName" -}}
{{ .Release.Name }}-{{ .Release.Namespace }}
{{- end }}

{{- define "storch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "storch.labels" -}}
{{ include "storch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The pod template of the Deployment (one storch) and of the StatefulSet (etcd.endpoints
set: replicated storch, with the secrets key, the etcd flags and the standby-ok readiness). */}}
{{- define "storch.podTemplate" -}}
metadata:
  labels:
    {{- include "storch.selectorLabels" . | nindent 4 }}
spec:
  serviceAccountName: {{ include "storch.fullname" . }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    fsGroup: 65532      # makes the data volume writable by storch
    fsGroupChangePolicy: OnRootMismatch
    seccompProfile:
      type: RuntimeDefault
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- else }}
  {{- if .Values.etcd.endpoints }}
  affinity:
    # Replicated: instances on different nodes where the cluster allows, so that one node
    # going down does not take the leader and its standbys together.
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "storch.selectorLabels" . | nindent 16 }}
  {{- end }}
  {{- end }}
  containers:
    - name: storch
      image: "{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --in-cluster
        - --data-dir=/var/lib/storch
        - --address=0.0.0.0
        - "--log-format={{ .Values.logFormat }}"
        - --tls-cert=/etc/storch/tls/tls.crt
        - --tls-key=/etc/storch/tls/tls.key
        - --auth-token-file=/etc/storch/token/token
        {{- range .Values.provisioners }}
        - "--k8s-provisioner={{ . }}"
        {{- end }}
        - "--k8s-lease-name={{ .Values.lease.name }}"
        - "--k8s-lease-duration={{ .Values.lease.duration }}"
        {{- if .Values.etcd.endpoints }}
        - "--etcd-endpoints={{ join "," .Values.etcd.endpoints }}"
        - "--etcd-prefix={{ required "etcd.prefix is required (the etcd key prefix of this storch)" .Values.etcd.prefix }}"
        - "--etcd-lease-ttl={{ required "etcd.leaseTTL is required (e.g. 10s)" .Values.etcd.leaseTTL }}"
        - --secrets-key-file=/etc/storch/secrets-key/secret.key
        {{- end }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      env:
        - name: STORCH_POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: STORCH_NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
      ports:
        - name: api
          containerPort: 8000
          protocol: TCP
      livenessProbe:
        httpGet:
          path: /livez
          port: api
          scheme: HTTPS
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 6
      readinessProbe:
        httpGet:
          {{- if .Values.etcd.endpoints }}
          path: /readyz?standby=ok    # a caught-up standby is Ready; the Service picks the leader
          {{- else }}
          path: /readyz
          {{- end }}
          port: api
          scheme: HTTPS
        periodSeconds: 5
        timeoutSeconds: 5
        failureThreshold: 3
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        readOnlyRootFilesystem: true
        allowPrivilegeEscalation: false
        capabilities:
          drop: ["ALL"]
        seccompProfile:
          type: RuntimeDefault
      volumeMounts:
        - name: data
          mountPath: /var/lib/storch
        - name: tls
          mountPath: /etc/storch/tls
          readOnly: true
        - name: token
          mountPath: /etc/storch/token
          readOnly: true
        {{- if .Values.etcd.endpoints }}
        - name: secrets-key
          mountPath: /etc/storch/secrets-key
          readOnly: true
        {{- end }}
        - name: tmp
          mountPath: /tmp
  volumes:
    {{- if not .Values.etcd.endpoints }}
    - name: data
      persistentVolumeClaim:
        claimName: {{ include "storch.fullname" . }}-data
    {{- end }}
    - name: tls
      secret:
        secretName: {{ required "tls.secretName is required (a kubernetes.io/tls Secret)" .Values.tls.secretName | quote }}
        defaultMode: 288    # 0440: owner and fsGroup read
    - name: token
      secret:
        secretName: {{ required "auth.tokenSecretName is required (a Secret with the key \"token\")" .Values.auth.tokenSecretName | quote }}
        defaultMode: 288    # 0440
    {{- if .Values.etcd.endpoints }}
    - name: secrets-key
      secret:
        secretName: {{ required "etcd.secretsKeySecret is required with etcd.endpoints: the name of a Secret holding the 32-byte secrets key shared by every instance under the key secret.key (see deploy/README.md)" .Values.etcd.secretsKeySecret | quote }}
        defaultMode: 288    # 0440
        items:
          - key: secret.key
            path: secret.key
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 64Mi
{{- end }}
