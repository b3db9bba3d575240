package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-dev/ferry/internal/events"
)

// NATSImage is the tag of the nats-server image NATSServerImage writes.
const NATSImage = "ferry.local/nats-server:test"

// NATSServerImage builds nats-server at the version ferry's go.mod pins
// (the embedded server's), static, and writes it as an image tarball in a
// directory of t's, for real nodes to import (RealNodes' images).
func NATSServerImage(t T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/nats-io/nats-server/v2")
	cmd.Dir = RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: go build nats-server: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nats-server.tar")
	if err := WriteImage(path, NATSImage, "nats-server", data, []string{"/nats-server", "--config", "/etc/nats/nats.conf"}); err != nil {
		t.Fatalf("testenv: image %s: %v", NATSImage, err)
	}
	return path
}

// natsPodsNamespace is where NATSPods runs, as docs/install.md's Helm
// release does.
const natsPodsNamespace = "nats"

// The NATS pods' Services take fixed addresses, since the test's
// clusters run no DNS: the clients' Service, then one per server, which
// the servers' routes dial and their certificate names. 10.0.0.0/24's
// lowest sixteen addresses are those the API server leaves to Services
// that ask for one.
var (
	natsClientIP = "10.0.0.11"
	natsRouteIPs = []string{"10.0.0.12", "10.0.0.13", "10.0.0.14"}
)

// NATSPods is docs/install.md's NATS cluster run as pods of a cluster
// with real nodes: three nats-server pods of a StatefulSet in namespace
// nats, JetStream on, clients and routes over TLS only (a certificate of
// the test's CA, each route verified against it), and ferry's two users
// in an account of their own, allowed what events.RolePermissions allows.
// Where the docs use the NATS Helm chart and DNS names, this uses
// Services with fixed addresses: the test's clusters run no DNS.
type NATSPods struct {
	// URL is the clients' Service, as the cluster overlay's nats-url
	// takes it.
	URL string
	// CA is the certificate (PEM) that signed the servers'.
	CA []byte
	// Passwords are the users' passwords, by role.
	Passwords map[events.Role]string
}

// StartNATSPods creates NATSPods in k, whose nodes run NATSImage, and
// waits until its three servers are Ready.
func StartNATSPods(t T, ctx context.Context, k *Kube) *NATSPods {
	t.Helper()
	var ips []net.IP
	for _, ip := range append([]string{natsClientIP}, natsRouteIPs...) {
		ips = append(ips, net.ParseIP(ip))
	}
	ca, cert, key := natsCertificates(t, ips)
	np := &NATSPods{URL: "tls://" + natsClientIP + ":4222", CA: ca, Passwords: map[events.Role]string{}}
	env := []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	users := map[string][]byte{}
	for _, role := range events.Roles {
		np.Passwords[role] = randomHex(16)
		v := strings.ToUpper(string(role)) + "_PASSWORD"
		users[v] = []byte(np.Passwords[role])
		env = append(env, corev1.EnvVar{Name: v, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "nats-users"}, Key: v}}})
	}
	labels := map[string]string{"app.kubernetes.io/name": "nats"}
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: natsPodsNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: "nats-tls"},
			Data: map[string][]byte{"tls.crt": cert, "tls.key": key, "ca.crt": ca}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: "nats-users"}, Data: users},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: "nats-config"},
			Data: map[string]string{"nats.conf": natsConf(t)}},
		natsService("nats", natsClientIP, labels, 4222),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: "nats-headless"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, Ports: []corev1.ServicePort{{Name: "cluster", Port: 6222}}}},
	}
	for i, ip := range natsRouteIPs {
		name := fmt.Sprintf("nats-%d", i)
		objects = append(objects, natsService(name, ip, map[string]string{"statefulset.kubernetes.io/pod-name": name}, 6222))
	}
	objects = append(objects, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: "nats"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "nats-headless", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
					Containers: []corev1.Container{{
						Name: "nats", Image: NATSImage, ImagePullPolicy: corev1.PullNever, Env: env,
						// A server that exits says why in its status.
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						Ports:                    []corev1.ContainerPort{{Name: "client", ContainerPort: 4222}, {Name: "cluster", ContainerPort: 6222}, {Name: "monitor", ContainerPort: 8222}},
						ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz?js-enabled-only=true", Port: intstr.FromString("monitor")}}, PeriodSeconds: 2},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/nats"},
							{Name: "tls", MountPath: "/etc/nats-tls", ReadOnly: true},
							{Name: "data", MountPath: "/data"},
						},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nats-config"}}}},
						{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nats-tls"}}},
						{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	})
	for _, o := range objects {
		if err := k.Client.Create(ctx, o); err != nil {
			t.Fatalf("testenv: NATS pods: create %T %s: %v", o, o.GetName(), err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods, err := k.Pods(ctx, natsPodsNamespace, labels, func(*corev1.Pod) bool { return true })
		ready := 0
		var states []string
		for i := range pods {
			if Serving(&pods[i]) {
				ready++
			}
			for _, cs := range pods[i].Status.ContainerStatuses {
				state := fmt.Sprintf("%s: ready %t, %d restarts", pods[i].Name, cs.Ready, cs.RestartCount)
				if term := cs.LastTerminationState.Terminated; term != nil {
					state += fmt.Sprintf(", last exit %d: %s", term.ExitCode, strings.TrimSpace(term.Message))
				}
				states = append(states, state)
			}
		}
		if err == nil && ready == 3 {
			return np
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			t.Fatalf("testenv: NATS pods: %d of 3 Ready after 3 minutes (%v):\n%s", ready, err, strings.Join(states, "\n"))
		}
		time.Sleep(time.Second)
	}
}

func natsService(name, ip string, selector map[string]string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: natsPodsNamespace, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, Selector: selector, PublishNotReadyAddresses: port == 6222,
			Ports: []corev1.ServicePort{{Name: "nats", Port: port, TargetPort: intstr.FromInt32(port)}}}}
}

// natsConf is the servers' configuration, as docs/install.md's values
// make the Helm chart write it: the server's name from its pod's, TLS
// for clients and routes, JetStream on the pod's volume, the routes to
// every server's Service, and the account FERRY with ferry's two users,
// whose passwords the environment holds.
func natsConf(t T) string {
	t.Helper()
	// JSON lists are the configuration's lists of strings; "<" and ">"
	// stay as they are (the configuration has no \u escapes).
	quoted := func(v any) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(b.String())
	}
	var routes []string
	for _, ip := range natsRouteIPs {
		routes = append(routes, "tls://"+ip+":6222")
	}
	var users []string
	for _, role := range events.Roles {
		p := events.RolePermissions(role)
		users = append(users, fmt.Sprintf(`      {user: %q, password: $%s_PASSWORD, permissions: {publish: {allow: %s}, subscribe: {allow: %s}}}`,
			natsRoleUser(role), strings.ToUpper(string(role)), quoted(p.Publish), quoted(p.Subscribe)))
	}
	const tls = `{cert_file: "/etc/nats-tls/tls.crt", key_file: "/etc/nats-tls/tls.key", ca_file: "/etc/nats-tls/ca.crt", timeout: 5`
	return fmt.Sprintf(`server_name: $POD_NAME
port: 4222
http_port: 8222
tls: %s}
jetstream: {store_dir: "/data", max_memory_store: 64MB, max_file_store: 1GB}
cluster: {
  name: ferry
  port: 6222
  routes: %s
  # Pod addresses are in no certificate: neither routes nor clients are
  # told of them, only of the Services.
  no_advertise: true
  tls: %s, verify: true}
}
accounts: {
  FERRY: {
    jetstream: enabled
    users: [
%s
    ]
  }
}
`, tls, quoted(routes), tls, strings.Join(users, "\n"))
}
