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
        {{- if .Values.csi.enabled }}
        - --csi-endpoint=unix:///csi/csi.sock
        - "--csi-driver-name={{ .Values.csi.driverName }}"
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
        {{- if .Values.csi.enabled }}
        - name: csi-socket
          mountPath: /csi
    {{- include "storch.csiSidecars" . | nindent 4 }}
        {{- end }}
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
    {{- if .Values.csi.enabled }}
    - name: csi-socket     # storch's CSI socket, shared with the sidecars
      emptyDir:
        sizeLimit: 1Mi
    {{- end }}
{{- end }}

{{/* The CSI sidecars next to storch (csi.enabled), each on storch's socket. Replicated
(etcd.endpoints), every instance runs them and they elect a leader on a Lease; those of a
standby wait for its Probe to answer ready, that is, until it leads. */}}
{{- define "storch.csiSidecars" -}}
{{- $replicated := .Values.etcd.endpoints -}}
- name: csi-provisioner
  image: {{ .Values.csi.images.provisioner | quote }}
  imagePullPolicy: IfNotPresent
  args:
    - --csi-address=/csi/csi.sock
    - --timeout=60s
    - --extra-create-metadata
    - --feature-gates=Topology=true
    {{- if .Values.csi.storageCapacity }}
    - --enable-capacity
    - --capacity-ownerref-level={{ if $replicated }}1{{ else }}2{{ end }}
    {{- end }}
    {{- if $replicated }}
    - --leader-election
    - --leader-election-namespace=$(NAMESPACE)
    {{- end }}
  env:
    - name: NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
  {{- include "storch.csiSidecarCommon" . | nindent 2 }}
{{- range $name, $image := dict "csi-attacher" .Values.csi.images.attacher "csi-snapshotter" .Values.csi.images.snapshotter "csi-resizer" .Values.csi.images.resizer }}
- name: {{ $name }}
  image: {{ $image | quote }}
  imagePullPolicy: IfNotPresent
  args:
    - --csi-address=/csi/csi.sock
    - --timeout=60s
    {{- if eq $name "csi-snapshotter" }}
    - --extra-create-metadata
    {{- end }}
    {{- if eq $name "csi-resizer" }}
    - --handle-volume-inuse-error=false
    {{- end }}
    {{- if $replicated }}
    - --leader-election
    - --leader-election-namespace=$(NAMESPACE)
  env:
    - name: NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- end }}
  {{- include "storch.csiSidecarCommon" $ | nindent 2 }}
{{- end }}
{{- end }}

{{- define "storch.csiSidecarCommon" -}}
resources:
  requests:
    cpu: 10m
    memory: 32Mi
  limits:
    memory: 256Mi
securityContext:
  readOnlyRootFilesystem: true
  allowPrivilegeEscalation: false
  capabilities:
    drop: ["ALL"]
volumeMounts:
  - name: csi-socket
    mountPath: /csi
{{- end }}

{{/* The node plugin's namespace. */}}
{{- define "storch.csiNodeNamespace" -}}
{{ .Values.csi.node.namespace | default .Release.Namespace }}
{{- end }}

{{/* The node plugin's DaemonSet; with a zone, for that zone's nodes only, which it reports
as their topology (--zone). Called with (dict "root" $ "zone" ZONE). */}}
{{- define "storch.csiNodeDaemonSet" -}}
{{- $ := .root }}
{{- $zone := .zone }}
{{- $socketDir := printf "%s/plugins/%s" $.Values.csi.kubeletDir $.Values.csi.driverName }}
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "storch.fullname" $ }}-csi-node{{ with $zone }}-{{ . }}{{ end }}
  namespace: {{ include "storch.csiNodeNamespace" $ }}
  labels:
    {{- include "storch.labels" $ | nindent 4 }}
    app.kubernetes.io/component: csi-node
spec:
  selector:
    matchLabels:
      {{- include "storch.selectorLabels" $ | nindent 6 }}
      app.kubernetes.io/component: csi-node
      {{- with $zone }}
      topology.kubernetes.io/zone: {{ . | quote }}
      {{- end }}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        {{- include "storch.selectorLabels" $ | nindent 8 }}
        app.kubernetes.io/component: csi-node
        {{- with $zone }}
        topology.kubernetes.io/zone: {{ . | quote }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "storch.fullname" $ }}-csi-node
      automountServiceAccountToken: false
      hostNetwork: true
      dnsPolicy: ClusterFirstWithHostNet
      priorityClassName: system-node-critical
      {{- with $zone }}
      nodeSelector:
        topology.kubernetes.io/zone: {{ . | quote }}
      {{- end }}
      tolerations:
        - operator: Exists
      containers:
        - name: storch
          image: "{{ $.Values.image.repository }}:{{ $.Values.image.tag | default $.Chart.AppVersion }}"
          imagePullPolicy: {{ $.Values.image.pullPolicy }}
          args:
            - csi
            - node
            - --endpoint=unix:///csi/csi.sock
            - --node-id=$(NODE_NAME)
            - "--driver-name={{ $.Values.csi.driverName }}"
            {{- with $zone }}
            - "--zone={{ . }}"
            {{- end }}
            {{- if $.Values.csi.node.maxVolumes }}
            - "--max-volumes={{ int $.Values.csi.node.maxVolumes }}"
            {{- end }}
          env:
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
          ports:
            - name: healthz
              containerPort: {{ int $.Values.csi.node.healthPort }}
              protocol: TCP
          livenessProbe:
            httpGet:
              path: /healthz
              port: healthz
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 5
          resources:
            requests:
              cpu: 10m
              memory: 64Mi
            limits:
              memory: 256Mi
          securityContext:
            privileged: true
            runAsUser: 0
            runAsGroup: 0
          volumeMounts:
            - name: socket-dir
              mountPath: /csi
            - name: kubelet-dir
              mountPath: {{ $.Values.csi.kubeletDir }}
              mountPropagation: Bidirectional
            - name: dev
              mountPath: /dev
              mountPropagation: HostToContainer
            - name: sys
              mountPath: /sys
              mountPropagation: HostToContainer
            - name: iscsi-config
              mountPath: /etc/iscsi
        - name: node-driver-registrar
          image: {{ $.Values.csi.images.nodeDriverRegistrar | quote }}
          imagePullPolicy: IfNotPresent
          args:
            - --csi-address=/csi/csi.sock
            - "--kubelet-registration-path={{ $socketDir }}/csi.sock"
          resources:
            requests:
              cpu: 10m
              memory: 16Mi
            limits:
              memory: 64Mi
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: socket-dir
              mountPath: /csi
            - name: registration-dir
              mountPath: /registration
        - name: liveness-probe
          image: {{ $.Values.csi.images.livenessprobe | quote }}
          imagePullPolicy: IfNotPresent
          args:
            - --csi-address=/csi/csi.sock
            - "--http-endpoint=:{{ int $.Values.csi.node.healthPort }}"
            - --probe-timeout=3s
          resources:
            requests:
              cpu: 10m
              memory: 16Mi
            limits:
              memory: 64Mi
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: socket-dir
              mountPath: /csi
      volumes:
        - name: socket-dir
          hostPath:
            path: {{ $socketDir }}
            type: DirectoryOrCreate
        - name: registration-dir
          hostPath:
            path: {{ $.Values.csi.kubeletDir }}/plugins_registry
            type: Directory
        - name: kubelet-dir
          hostPath:
            path: {{ $.Values.csi.kubeletDir }}
            type: Directory
        - name: dev
          hostPath:
            path: /dev
            type: Directory
        - name: sys
          hostPath:
            path: /sys
            type: Directory
        - name: iscsi-config
          hostPath:
            path: /etc/iscsi
            type: DirectoryOrCreate
{{- end }}
