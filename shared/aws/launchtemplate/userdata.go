package launchtemplate

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"net/textproto"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/karpless/karpless/shared/apis/aws/v1"
	"github.com/karpless/karpless/shared/core/catalog"
	"github.com/karpless/karpless/shared/kube/eksauth"
)

// UserDataInput is everything the user data of one launch template depends on.
type UserDataInput struct {
	// Family is the resolved AMI family (nodeclass.Family).
	Family  string
	Cluster eksauth.ClusterInfo
	// Kubelet is the kubelet configuration with clusterDNS and maxPods
	// already filled in for the launch template's instance types.
	Kubelet *awsv1.KubeletConfiguration
	// Labels are the node labels to register with (already filtered of the
	// ones the node restriction admission plugin forbids).
	Labels map[string]string
	// Taints are registered with the node, karpenter.sh/unregistered included.
	Taints []corev1.Taint
	// Custom is spec.userData.
	Custom              *string
	InstanceStorePolicy *awsv1.InstanceStorePolicy
	// BottlerocketDefaultBind: the Bottlerocket AMI binds the instance
	// store to its default directories itself (SupportsDefaultBind).
	BottlerocketDefaultBind bool
}

// ErrServiceCIDRUnknown means AL2023 user data cannot be written: nodeadm
// requires the cluster's service CIDR.
var ErrServiceCIDRUnknown = errors.New("AL2023 user data needs the cluster's service CIDR, which is unknown (set CLUSTER_SERVICE_CIDR or allow eks:DescribeCluster)")

// MIME layout shared by the AL2023 and AL2 user data.
const (
	mimeBoundary       = "//"
	contentTypeShell   = `text/x-shellscript; charset="us-ascii"`
	contentTypeNodeCfg = "application/node.eks.aws"
)

// UserData renders the user data (not yet base64-encoded) for in.Family:
//
//   - AL2023: a MIME multipart archive (boundary "//"): the parts of
//     spec.userData first (a MIME archive is split into its parts, YAML becomes
//     an application/node.eks.aws part, anything else a shell script), then the
//     generated nodeadm NodeConfig with the cluster, kubelet config, node labels
//     flag and RAID0 local storage when asked for.
//   - AL2: a MIME archive of spec.userData then a shell part calling
//     /etc/eks/bootstrap.sh with the kubelet arguments.
//   - Bottlerocket: spec.userData's TOML with settings.kubernetes overridden
//     by the cluster, labels, taints and kubelet settings.
//   - Windows*: a <powershell> script running spec.userData, then
//     Start-EKSBootstrap.ps1.
//   - Custom: spec.userData unchanged.
//
// The output is a pure function of in: map keys are sorted, so equal inputs
// give equal bytes and so equal launch template names.
func UserData(in UserDataInput) (string, error) {
	switch {
	case in.Family == catalog.FamilyAL2023:
		return nodeadmUserData(in)
	case in.Family == catalog.FamilyAL2:
		return eksBootstrapUserData(in)
	case in.Family == catalog.FamilyBottlerocket:
		return bottlerocketUserData(in)
	case strings.HasPrefix(in.Family, "Windows"):
		return windowsUserData(in), nil
	case in.Family == catalog.FamilyCustom:
		return deref(in.Custom), nil
	}
	return "", fmt.Errorf("unknown AMI family %q", in.Family)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mimePart is one part of a MIME multipart archive.
type mimePart struct {
	ContentType string
	Body        string
}

func isMIME(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "MIME-Version:") || strings.HasPrefix(t, "Content-Type:")
}

// parseMIME splits a multipart archive into its parts.
func parseMIME(s string) ([]mimePart, error) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(s, " \t\r\n")))
	if err != nil {
		return nil, fmt.Errorf("user data looks like MIME but is not readable: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return nil, fmt.Errorf("user data has no valid Content-Type header: %w", err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("user data MIME type is %s, want multipart/mixed", mediaType)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var parts []mimePart
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			return parts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading user data MIME part: %w", err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("reading user data MIME part: %w", err)
		}
		parts = append(parts, mimePart{ContentType: p.Header.Get("Content-Type"), Body: string(body)})
	}
}

// writeMIME serializes parts with the "//" boundary and LF line endings
// (cloud-init reads both; LF keeps the bytes equal to what users expect).
func writeMIME(parts []mimePart) (string, error) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(mimeBoundary); err != nil {
		return "", err
	}
	b.WriteString("MIME-Version: 1.0\n")
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=%q\n\n", mimeBoundary)
	for _, p := range parts {
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.ContentType}})
		if err != nil {
			return "", err
		}
		if _, err := io.WriteString(pw, p.Body); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return strings.ReplaceAll(b.String(), "\r", ""), nil
}

// customParts turns spec.userData into MIME parts for AL2023: a MIME
// archive's own parts, else one NodeConfig part when it is YAML (an object),
// else one shell part.
func customParts(custom string) ([]mimePart, error) {
	if strings.TrimSpace(custom) == "" {
		return nil, nil
	}
	if isMIME(custom) {
		return parseMIME(custom)
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(custom), &obj); err == nil && obj != nil {
		return []mimePart{{ContentType: contentTypeNodeCfg, Body: custom}}, nil
	}
	return []mimePart{{ContentType: contentTypeShell, Body: custom}}, nil
}

// kubeletConfigMap is the kubelet configuration as nodeadm's
// spec.kubelet.config wants it (upstream KubeletConfiguration field names).
func kubeletConfigMap(k *awsv1.KubeletConfiguration, taints []corev1.Taint) (map[string]any, error) {
	out := map[string]any{}
	if k != nil {
		raw, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			return nil, err
		}
	}
	reg := make([]map[string]any, 0, len(taints))
	for _, t := range taints {
		m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
		if t.Value != "" {
			m["value"] = t.Value
		}
		reg = append(reg, m)
	}
	out["registerWithTaints"] = reg
	return out, nil
}

// nodeLabelsFlag is --node-labels="k=v,..." with sorted keys, or "".
func nodeLabelsFlag(labels map[string]string) string {
	if len(labels) == 0 {
		return ""
	}
	kv := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		kv = append(kv, k+"="+labels[k])
	}
	return "--node-labels=" + strconv.Quote(strings.Join(kv, ","))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// NodeConfigHeader starts the NodeConfig part Karpless generates.
const NodeConfigHeader = "# Karpenter Generated NodeConfig\n"

func nodeadmUserData(in UserDataInput) (string, error) {
	c := in.Cluster
	if c.ServiceCIDR == "" {
		return "", ErrServiceCIDRUnknown
	}
	ca, err := base64.StdEncoding.DecodeString(c.CABundle)
	if err != nil {
		return "", fmt.Errorf("cluster CA bundle is not base64: %w", err)
	}
	kubeletCfg, err := kubeletConfigMap(in.Kubelet, in.Taints)
	if err != nil {
		return "", err
	}
	kubelet := map[string]any{"config": kubeletCfg}
	if f := nodeLabelsFlag(in.Labels); f != "" {
		kubelet["flags"] = []string{f}
	}
	localStorage := map[string]any{}
	if in.InstanceStorePolicy != nil && *in.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 {
		localStorage["strategy"] = "RAID0"
	}
	nodeConfig := map[string]any{
		"apiVersion": "node.eks.aws/v1alpha1",
		"kind":       "NodeConfig",
		"metadata":   map[string]any{},
		"spec": map[string]any{
			"cluster": map[string]any{
				"name":                 c.Name,
				"apiServerEndpoint":    c.Endpoint,
				"certificateAuthority": base64.StdEncoding.EncodeToString(ca),
				"cidr":                 c.ServiceCIDR,
			},
			"containerd": map[string]any{},
			"instance":   map[string]any{"localStorage": localStorage},
			"kubelet":    kubelet,
		},
	}
	doc, err := yaml.Marshal(nodeConfig)
	if err != nil {
		return "", err
	}
	parts, err := customParts(deref(in.Custom))
	if err != nil {
		return "", err
	}
	parts = append(parts, mimePart{ContentType: contentTypeNodeCfg, Body: NodeConfigHeader + string(doc)})
	return writeMIME(parts)
}

// kubeletArgs are the kubelet flags of the AL2 and Windows bootstrap
// scripts, in a fixed order with sorted map entries.
func kubeletArgs(in UserDataInput) []string {
	var args []string
	if f := nodeLabelsFlag(in.Labels); f != "" {
		args = append(args, f)
	}
	taints := make([]string, 0, len(in.Taints))
	for _, t := range in.Taints {
		taints = append(taints, t.ToString())
	}
	args = append(args, "--register-with-taints="+strconv.Quote(strings.Join(taints, ",")))
	k := in.Kubelet
	if k == nil {
		return args
	}
	if k.MaxPods != nil {
		args = append(args, fmt.Sprintf("--max-pods=%d", *k.MaxPods))
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	joined := func(flag string, m map[string]string, sep string) {
		if len(m) == 0 {
			return
		}
		kv := make([]string, 0, len(m))
		for _, key := range sortedKeys(m) {
			kv = append(kv, key+sep+m[key])
		}
		args = append(args, flag+"="+strconv.Quote(strings.Join(kv, ",")))
	}
	joined("--system-reserved", k.SystemReserved, "=")
	joined("--kube-reserved", k.KubeReserved, "=")
	joined("--eviction-hard", k.EvictionHard, "<")
	joined("--eviction-soft", k.EvictionSoft, "<")
	grace := map[string]string{}
	for key, d := range k.EvictionSoftGracePeriod {
		grace[key] = d.Duration.String()
	}
	joined("--eviction-soft-grace-period", grace, "=")
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

func eksBootstrapUserData(in UserDataInput) (string, error) {
	c := in.Cluster
	var s strings.Builder
	s.WriteString("#!/bin/bash -xe\n")
	s.WriteString("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	// bootstrap.sh wants "--flag value", not "--flag=value".
	fmt.Fprintf(&s, "/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s' --b64-cluster-ca '%s'", c.Name, c.Endpoint, c.CABundle)
	dns := ""
	if in.Kubelet != nil && len(in.Kubelet.ClusterDNS) > 0 {
		dns = in.Kubelet.ClusterDNS[0]
	}
	if ip := net.ParseIP(dns); ip != nil && ip.To4() == nil {
		s.WriteString(" \\\n--ip-family ipv6")
	}
	if dns != "" {
		fmt.Fprintf(&s, " \\\n--dns-cluster-ip '%s'", dns)
	}
	if in.Kubelet != nil && in.Kubelet.MaxPods != nil {
		s.WriteString(" \\\n--use-max-pods false")
	}
	if args := kubeletArgs(in); len(args) > 0 {
		fmt.Fprintf(&s, " \\\n--kubelet-extra-args '%s'", strings.Join(args, " "))
	}
	if in.InstanceStorePolicy != nil && *in.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 {
		s.WriteString(" \\\n--local-disks raid0")
	}
	var parts []mimePart
	if custom := deref(in.Custom); strings.TrimSpace(custom) != "" {
		if isMIME(custom) {
			p, err := parseMIME(custom)
			if err != nil {
				return "", err
			}
			parts = append(parts, p...)
		} else {
			parts = append(parts, mimePart{ContentType: contentTypeShell, Body: custom})
		}
	}
	parts = append(parts, mimePart{ContentType: contentTypeShell, Body: s.String()})
	return writeMIME(parts)
}

func windowsUserData(in UserDataInput) string {
	c := in.Cluster
	var s strings.Builder
	s.WriteString("<powershell>\n")
	if custom := deref(in.Custom); custom != "" {
		s.WriteString(custom + "\n")
	}
	s.WriteString("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n")
	fmt.Fprintf(&s, "& $EKSBootstrapScriptFile -EKSClusterName '%s' -APIServerEndpoint '%s' -Base64ClusterCA '%s'", c.Name, c.Endpoint, c.CABundle)
	if args := kubeletArgs(in); len(args) > 0 {
		fmt.Fprintf(&s, " -KubeletExtraArgs '%s'", strings.Join(args, " "))
	}
	if in.Kubelet != nil && len(in.Kubelet.ClusterDNS) > 0 {
		fmt.Fprintf(&s, " -DNSClusterIP '%s'", in.Kubelet.ClusterDNS[0])
	}
	s.WriteString("\n</powershell>")
	return s.String()
}

// bottlerocketUserData merges the user's TOML with the settings Karpless
// owns. The user's other settings (network, ntp, host containers ...) are
// kept as written, and of settings.kubernetes the keys Karpenter models
// (bottlerocketKubernetesKeys; others are dropped, as Karpenter does);
// node-taints are replaced by the NodeClaim's, node-labels merged with
// ours winning.
func bottlerocketUserData(in UserDataInput) (string, error) {
	doc := map[string]any{}
	if custom := deref(in.Custom); strings.TrimSpace(custom) != "" {
		if err := toml.Unmarshal([]byte(custom), &doc); err != nil {
			return "", fmt.Errorf("spec.userData is not valid TOML for Bottlerocket: %w", err)
		}
	}
	settings, err := table(doc, "settings")
	if err != nil {
		return "", err
	}
	k8s, err := table(settings, "kubernetes")
	if err != nil {
		return "", err
	}
	for key := range k8s {
		if !bottlerocketKubernetesKeys[key] {
			delete(k8s, key)
		}
	}
	c := in.Cluster
	k8s["cluster-name"] = c.Name
	k8s["api-server"] = c.Endpoint
	k8s["cluster-certificate"] = c.CABundle
	labels, err := table(k8s, "node-labels")
	if err != nil {
		return "", err
	}
	for k, v := range in.Labels {
		labels[k] = v
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints := map[string]any{}
	for _, t := range in.Taints {
		list, _ := taints[t.Key].([]any)
		taints[t.Key] = append(list, t.Value+":"+string(t.Effect))
	}
	k8s["node-taints"] = taints
	if k := in.Kubelet; k != nil {
		if k.MaxPods != nil {
			k8s["max-pods"] = int64(*k.MaxPods)
		}
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS[0]
		}
		setStringMap := func(key string, m map[string]string) {
			if m == nil {
				return
			}
			t := make(map[string]any, len(m))
			for mk, mv := range m {
				t[mk] = mv
			}
			k8s[key] = t
		}
		setStringMap("system-reserved", k.SystemReserved)
		setStringMap("kube-reserved", k.KubeReserved)
		setStringMap("eviction-hard", k.EvictionHard)
		setStringMap("eviction-soft", k.EvictionSoft)
		if k.EvictionSoftGracePeriod != nil {
			t := map[string]any{}
			for mk, d := range k.EvictionSoftGracePeriod {
				t[mk] = d.Duration.String()
			}
			k8s["eviction-soft-grace-period"] = t
		}
		if k.EvictionMaxPodGracePeriod != nil {
			k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*k.ImageGCHighThresholdPercent))
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*k.ImageGCLowThresholdPercent))
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	if in.InstanceStorePolicy != nil && *in.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 {
		cmds, err := table(settings, "bootstrap-commands")
		if err != nil {
			return "", err
		}
		bind := []any{"apiclient", "ephemeral-storage", "bind"}
		if !in.BottlerocketDefaultBind {
			bind = append(bind, "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods")
		}
		cmds["000-mount-instance-storage"] = map[string]any{
			"commands": []any{
				[]any{"apiclient", "ephemeral-storage", "init"},
				bind,
			},
			"mode":      "always",
			"essential": true,
		}
	}
	out, err := toml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("writing Bottlerocket TOML: %w", err)
	}
	return string(out), nil
}

// table returns m[key] as a TOML table, creating it when absent.
func table(m map[string]any, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok {
		t := map[string]any{}
		m[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Bottlerocket user data: %s must be a table, not %T", key, v)
	}
	return t, nil
}
