package step

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferry-dev/ferry/internal/failure"
)

// Params are a step's parameters by key, as strings: they are shown in
// pull-request comments as they are, so each is written for a reader as
// much as for the executor. The planner writes them with Params.Set and the
// encoders below; executors read them with the typed getters, which are the
// only parsers. A parameter that does not parse is a defect of the step,
// which no retry fixes: the getters' errors are failure.Terminal.
type Params map[string]string

// Parameter keys. Those of patch steps are also the fields they set.
const (
	ParamPaused                  = "paused"
	ParamReplicas                = "replicas"
	ParamVersion                 = "version"
	ParamControlPlane            = "controlPlane"
	ParamInfrastructureRef       = "infrastructureRef"
	ParamControlPlaneRef         = "controlPlaneRef"
	ParamMachineTemplateInfraRef = "machineTemplate.infrastructureRef"
	ParamBootstrap               = "bootstrap"
	ParamRolloutAfter            = "rolloutAfter"
	ParamPreferredAddressTypes   = "kubelet.preferredAddressTypes"
	ParamDeployment              = "deployment"
	ParamMachineSet              = "machineSet"
	ParamOwner                   = "owner"
	ParamProviderID              = "providerID"
	ParamFailureDomain           = "failureDomain"
	ParamIdentityRef             = "identityRef"
	ParamFlavor                  = "flavor"
	ParamImage                   = "image"
	ParamSSHKeyName              = "sshKeyName"
	ParamKubeletExtraArgs        = "kubeletExtraArgs"
	ParamFrom                    = "from"
	ParamKeys                    = "keys"
	ParamLabel                   = "label"
	ParamMachine                 = "machine"
	ParamFor                     = "for"
	ParamTimeout                 = "timeout"
	ParamURL                     = "url"
	ParamExpect                  = "expect"
	ParamCredentials             = "credentials"
	ParamRecorded                = "recorded"
	ParamTolerations             = "tolerations"
	ParamNodeSelector            = "nodeSelector"
	ParamPublicKey               = "publicKey"
	ParamNames                   = "names"
	ParamMachines                = "machines"
	ParamResources               = "resources"
	ParamRespect                 = "respect"
	ParamIgnore                  = "ignore"
	ParamSpec                    = "spec"
	ParamJoinConfiguration       = "joinConfiguration"
	ParamPorts                   = "ports"
	ParamNetwork                 = "network"
	ParamSubnets                 = "subnets"
	ParamExternalNetwork         = "externalNetwork"
	ParamDisableExternalNetwork  = "disableExternalNetwork"
	ParamDNSNameservers          = "dnsNameservers"
	ParamControlPlaneZones       = "controlPlaneAvailabilityZones"
	ParamAPIServerLoadBalancer   = "apiServerLoadBalancer"
	ParamDisableAPIServerFloatIP = "disableAPIServerFloatingIP"
	ParamAPIServerFixedIP        = "apiServerFixedIP"
	ParamAPIServerFloatingIP     = "apiServerFloatingIP"
	ParamManagedSecurityGroups   = "managedSecurityGroups"
	ParamControlPlaneEndpoint    = "controlPlaneEndpoint"
	ParamKubeadmConfigSpec       = "kubeadmConfigSpec"
	ParamClusterNameLabel        = "cluster.x-k8s.io/cluster-name"
	// ParamSecurityGroups are security group names, comma-separated.
	ParamSecurityGroups = "securityGroups"
	// ParamGateway is a gateway's base name (spec.replace.gateway.name),
	// the value of the ferry.dev/gateway label of its OpenStackServers.
	ParamGateway = "gateway"
	// ParamReplaces names the OpenStackServer a new gateway replaces.
	ParamReplaces = "replaces"
)

// Parameter values with a meaning of their own.
const (
	// RolloutNow is the only value of ParamRolloutAfter: the time of the write.
	RolloutNow = "now"
	// NodeSelectorNone schedules a manifest's pods on any node.
	NodeSelectorNone = "none"
	// Expect2xx is the answer a probe wants.
	Expect2xx = "2xx"
	// RespectDisruptionBudgets and IgnoreDaemonSets say how a drain evicts.
	RespectDisruptionBudgets = "PodDisruptionBudgets"
	IgnoreDaemonSets         = "DaemonSets"
	// ProviderIDLookup stands for a provider ID the planner could not
	// know because the cloud was not asked: the executor looks it up.
	ProviderIDLookup = "lookup in Nova by node name"
)

// The clauses of a wait step's ParamFor, joined by ", ". An executor that
// does not know a clause fails the step: a wait that ignored part of what
// the planner asks for would end early.
const (
	ForReady       = "status.ready"
	ForStable      = "replicas == ready == updated"
	ForAvailable   = "none unavailable"
	ForNoAdopted   = "no adopted machine left"
	ForOnOpenStack = "every control-plane machine on OpenStack"
	ForNodesReady  = "nodes Ready"
	ForAddress     = "an external address"
	ForWorkloads   = "workloads available"
	// ForActive: an OpenStackServer is ready, its Nova server ACTIVE.
	ForActive = "status.ready (server ACTIVE)"
)

// For joins wait clauses into a ParamFor value.
func For(clauses ...string) string { return strings.Join(clauses, ", ") }

// Clauses splits a ParamFor value into its clauses.
func Clauses(value string) []string {
	parts := strings.Split(value, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// NewParams builds parameters from key, value pairs, dropping empty values:
// a parameter the plan leaves out is not shown as "key=".
func NewParams(kv ...string) Params {
	p := Params{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			p[kv[i]] = kv[i+1]
		}
	}
	return p
}

// Bool encodes a flag: "true" or "false".
func Bool(b bool) string { return strconv.FormatBool(b) }

// Int encodes a count.
func Int(n int) string { return strconv.Itoa(n) }

// Ref encodes a reference to an object in the cluster's namespace:
// "Kind/name".
func Ref(kind, name string) string { return kind + "/" + name }

// Get returns a parameter's value, "" when absent.
func (p Params) Get(key string) string { return p[key] }

// Flag reads a boolean parameter; only "true" is true, so an absent one
// is false.
func (p Params) Flag(key string) bool { return p[key] == "true" }

// Bool reads a required boolean parameter written by Bool: one that
// decides either way, which an absent one must not decide by default.
func (p Params) Bool(key string) (bool, error) {
	v, err := p.Required(key)
	if err != nil {
		return false, err
	}
	b, err := strconv.ParseBool(v)
	if err != nil || (v != "true" && v != "false") {
		return false, failure.Terminal(fmt.Errorf("%s=%q is neither true nor false", key, v))
	}
	return b, nil
}

// Required reads a parameter the step cannot do without.
func (p Params) Required(key string) (string, error) {
	v := p[key]
	if v == "" {
		return "", failure.Terminal(fmt.Errorf("the step has no %s parameter", key))
	}
	return v, nil
}

// Count reads a required non-negative count that fits an int32 (the type
// of Kubernetes replica counts).
func (p Params) Count(key string) (int32, error) {
	v, err := p.Required(key)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, failure.Terminal(fmt.Errorf("%s=%q is not a count", key, v))
	}
	return int32(n), nil
}

// Duration reads a positive duration, def when the parameter is absent.
func (p Params) Duration(key string, def time.Duration) (time.Duration, error) {
	v := p[key]
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, failure.Terminal(fmt.Errorf("%s parameter %q is not a positive duration", key, v))
	}
	return d, nil
}

// ObjectRef is a decoded reference: Ref's "Kind/name", or "namespace/name"
// for ParamFrom.
type ObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Ref reads a required "Kind/name" reference.
func (p Params) Ref(key string) (ObjectRef, error) {
	v, err := p.Required(key)
	if err != nil {
		return ObjectRef{}, err
	}
	return ParseRef(key, v)
}

// ParseRef decodes one "Kind/name" value of parameter key.
func ParseRef(key, value string) (ObjectRef, error) {
	kind, name, ok := SplitPair(value, "/")
	if !ok {
		return ObjectRef{}, failure.Terminal(fmt.Errorf("parameter %s=%q is not Kind/name", key, value))
	}
	return ObjectRef{Kind: kind, Name: name}, nil
}

// Map reads "k=v,k2=v2" into a map; absent or empty gives nil.
func (p Params) Map(key string) (map[string]string, error) {
	pairs, err := p.pairs(key, "=", "key=value")
	if err != nil || pairs == nil {
		return nil, err
	}
	m := map[string]string{}
	for _, kv := range pairs {
		m[kv[0]] = kv[1]
	}
	return m, nil
}

// KeyCopies reads ParamKeys, "dst<-src,dst2<-src2"; absent gives nil,
// which copies every key under its own name.
func (p Params) KeyCopies() ([]KeyCopy, error) {
	pairs, err := p.pairs(ParamKeys, "<-", "dst<-src")
	var out []KeyCopy
	for _, kv := range pairs {
		out = append(out, KeyCopy{Dst: kv[0], Src: kv[1]})
	}
	return out, err
}

func (p Params) pairs(key, sep, shape string) ([][2]string, error) {
	value := p[key]
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out [][2]string
	for _, part := range strings.Split(value, ",") {
		a, b, ok := SplitPair(part, sep)
		if !ok {
			return nil, failure.Terminal(fmt.Errorf("parameter %s=%q: %q is not %s", key, value, part, shape))
		}
		out = append(out, [2]string{a, b})
	}
	return out, nil
}

// List reads a comma-separated list; absent gives nil.
func (p Params) List(key string) []string {
	if p[key] == "" {
		return nil
	}
	return strings.Split(p[key], ",")
}

// SplitPair splits "a<sep>b" around the first sep; ok is false when
// either side is empty.
func SplitPair(s, sep string) (a, b string, ok bool) {
	a, b, found := strings.Cut(s, sep)
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	return a, b, found && a != "" && b != ""
}

// IdentityRef encodes ParamIdentityRef: the identity Secret and the cloud
// in its clouds.yaml, "secret#cloud".
func IdentityRef(secret, cloud string) string { return secret + "#" + cloud }

// IdentityRef reads ParamIdentityRef; ok is false when the step has none.
func (p Params) IdentityRef() (secret, cloud string, ok bool, err error) {
	v := p[ParamIdentityRef]
	if v == "" {
		return "", "", false, nil
	}
	secret, cloud, ok = SplitPair(v, "#")
	if !ok {
		return "", "", false, failure.Terminal(fmt.Errorf("%s=%q is not secret#cloud", ParamIdentityRef, v))
	}
	return secret, cloud, true, nil
}

// NamespacedName encodes an object in another namespace: "namespace/name".
func NamespacedName(namespace, name string) string { return namespace + "/" + name }

// NamespacedName reads a required "namespace/name" parameter.
func (p Params) NamespacedName(key string) (namespace, name string, err error) {
	namespace, name, ok := SplitPair(p[key], "/")
	if !ok {
		return "", "", failure.Terminal(fmt.Errorf("parameter %s=%q is not namespace/name", key, p[key]))
	}
	return namespace, name, nil
}

// KeyCopy is one key of ParamKeys: Dst of the target Secret gets Src of
// the source Secret.
type KeyCopy struct{ Dst, Src string }

// String encodes it: "dst<-src".
func (k KeyCopy) String() string { return k.Dst + "<-" + k.Src }

// Expect reads a probe's ParamExpect: a class such as 2xx, or an exact
// code such as 204; absent means Expect2xx. ok reports whether a status
// code is what the probe expects.
func (p Params) Expect() (ok func(code int) bool, err error) {
	expect := p[ParamExpect]
	if expect == "" {
		expect = Expect2xx
	}
	if len(expect) == 3 && expect[1:] == "xx" && expect[0] >= '1' && expect[0] <= '5' {
		class := int(expect[0]-'0') * 100
		return func(code int) bool { return code >= class && code < class+100 }, nil
	}
	code, err := strconv.Atoi(expect)
	if err != nil || code < 100 || code > 599 {
		return nil, failure.Terminal(fmt.Errorf("expect parameter %q is neither a status class (2xx) nor a status code", expect))
	}
	return func(got int) bool { return got == code }, nil
}

// Resource encodes a network (or other OpenStack resource) a step names:
// "name=<name>" or "id=<id>".
func Resource(byID bool, value string) string {
	if byID {
		return "id=" + value
	}
	return "name=" + value
}

// Resource reads a required parameter written by Resource.
func (p Params) Resource(key string) (byID bool, value string, err error) {
	v, err := p.Required(key)
	if err != nil {
		return false, "", err
	}
	k, value, ok := SplitPair(v, "=")
	if !ok || (k != "name" && k != "id") {
		return false, "", failure.Terminal(fmt.Errorf("parameter %s=%q is not name=<name> or id=<id>", key, v))
	}
	return k == "id", value, nil
}

// Resources encodes a list of resources written by Resource, such as the
// subnets of an OpenStackCluster: "name=a;id=b".
func Resources(values ...string) string { return strings.Join(values, ";") }

// ResourceRef is one decoded resource of Resources: by ID, or by name.
type ResourceRef struct {
	ByID  bool
	Value string
}

// Resources reads a parameter written by Resources; absent gives nil.
func (p Params) Resources(key string) ([]ResourceRef, error) {
	if p[key] == "" {
		return nil, nil
	}
	var out []ResourceRef
	for _, v := range strings.Split(p[key], ";") {
		byID, value, err := Params{key: v}.Resource(key)
		if err != nil {
			return nil, err
		}
		out = append(out, ResourceRef{ByID: byID, Value: value})
	}
	return out, nil
}

// NetworkPort encodes ParamPorts, the one port of a machine: "network "
// and the network as Resource writes it.
func NetworkPort(network string) string { return "network " + network }

// NetworkPort reads a required ParamPorts written by NetworkPort.
func (p Params) NetworkPort() (byID bool, network string, err error) {
	v, err := p.Required(ParamPorts)
	if err != nil {
		return false, "", err
	}
	rest, ok := strings.CutPrefix(v, "network ")
	if !ok {
		return false, "", failure.Terminal(fmt.Errorf("parameter %s=%q is not network <name=...|id=...>", ParamPorts, v))
	}
	return Params{ParamPorts: rest}.Resource(ParamPorts)
}
