package testenv

// OverlayManifest is a VPN overlay between the networks of real nodes
// (Host.Route joins their node addresses, not their pods'): a DaemonSet
// in kube-system of the test application's overlay role (testapp
// overlay: a kernel VXLAN tunnel from each node to the nodes of the
// other networks, routes to their pods through it), with the
// ServiceAccount and the read of Nodes it needs. It is what the replace
// scenario's plan applies in its network-bridge phase, where seed 003
// runs an OpenVPN client DaemonSet: the kernel's VXLAN runs here (no
// WireGuard or GRE module, no registry for an OpenVPN image), and it
// carries pod traffic between the clouds as that VPN does, unencrypted.
func OverlayManifest() string {
	return `apiVersion: v1
kind: ServiceAccount
metadata: {name: ferry-overlay, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ferry-overlay}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ferry-overlay}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ferry-overlay}
subjects:
- {kind: ServiceAccount, name: ferry-overlay, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ferry-overlay, namespace: kube-system}
spec:
  selector:
    matchLabels: {app: ferry-overlay}
  template:
    metadata:
      labels: {app: ferry-overlay}
    spec:
      serviceAccountName: ferry-overlay
      hostNetwork: true
      terminationGracePeriodSeconds: 5
      tolerations: [{operator: Exists}]
      containers:
      - name: overlay
        image: ` + TestAppImage + `
        imagePullPolicy: Never
        args: [overlay]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        securityContext: {privileged: true}
`
}
