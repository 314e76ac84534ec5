package launchtemplate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/karpless/karpless/shared/core/catalog"
)

// NodeBootstrap is what a node learns from its user data when it joins:
// emulators read it to register fake nodes the way a real one would.
type NodeBootstrap struct {
	ClusterName string
	Endpoint    string
	Labels      map[string]string
	Taints      []corev1.Taint
	// MaxPods is 0 when the user data leaves it to the AMI.
	MaxPods int32
}

// ParseUserData reads the cluster, node labels, taints and max pods back
// from decoded user data of the given family (the inverse of UserData, and
// tolerant of user parts it does not understand). Custom user data yields
// an empty NodeBootstrap.
func ParseUserData(family, userData string) (NodeBootstrap, error) {
	switch {
	case family == catalog.FamilyAL2023:
		return parseNodeadm(userData)
	case family == catalog.FamilyBottlerocket:
		return parseBottlerocket(userData)
	case family == catalog.FamilyAL2:
		return parseBootstrapScript(userData, bootstrapArgs, "--kubelet-extra-args")
	case strings.HasPrefix(family, "Windows"):
		return parseBootstrapScript(userData, windowsArgs, "-KubeletExtraArgs")
	}
	return NodeBootstrap{Labels: map[string]string{}}, nil
}

type nodeConfigDoc struct {
	Kind string `json:"kind"`
	Spec struct {
		Cluster struct {
			Name              string `json:"name"`
			APIServerEndpoint string `json:"apiServerEndpoint"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]any `json:"config"`
			Flags  []string       `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// parseNodeadm merges the NodeConfig parts in order, later ones winning,
// as nodeadm does.
func parseNodeadm(userData string) (NodeBootstrap, error) {
	nb := NodeBootstrap{Labels: map[string]string{}}
	parts, err := parseMIME(userData)
	if err != nil {
		return nb, err
	}
	for _, p := range parts {
		if !strings.HasPrefix(p.ContentType, contentTypeNodeCfg) {
			continue
		}
		var doc nodeConfigDoc
		if err := yaml.Unmarshal([]byte(p.Body), &doc); err != nil {
			return nb, fmt.Errorf("NodeConfig part: %w", err)
		}
		if doc.Kind != "" && doc.Kind != "NodeConfig" {
			continue
		}
		if n := doc.Spec.Cluster.Name; n != "" {
			nb.ClusterName = n
		}
		if e := doc.Spec.Cluster.APIServerEndpoint; e != "" {
			nb.Endpoint = e
		}
		for _, f := range doc.Spec.Kubelet.Flags {
			if v, ok := strings.CutPrefix(f, "--node-labels="); ok {
				for k, val := range splitLabels(unquote(v)) {
					nb.Labels[k] = val
				}
			}
		}
		if mp, ok := doc.Spec.Kubelet.Config["maxPods"].(float64); ok {
			nb.MaxPods = int32(mp)
		}
		if raw, ok := doc.Spec.Kubelet.Config["registerWithTaints"].([]any); ok {
			nb.Taints = nil
			for _, t := range raw {
				m, _ := t.(map[string]any)
				key, _ := m["key"].(string)
				value, _ := m["value"].(string)
				effect, _ := m["effect"].(string)
				nb.Taints = append(nb.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
			}
		}
	}
	return nb, nil
}

func parseBottlerocket(userData string) (NodeBootstrap, error) {
	nb := NodeBootstrap{Labels: map[string]string{}}
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName string              `toml:"cluster-name"`
				APIServer   string              `toml:"api-server"`
				NodeLabels  map[string]string   `toml:"node-labels"`
				NodeTaints  map[string][]string `toml:"node-taints"`
				MaxPods     int32               `toml:"max-pods"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if err := toml.Unmarshal([]byte(userData), &doc); err != nil {
		return nb, fmt.Errorf("bottlerocket TOML: %w", err)
	}
	k := doc.Settings.Kubernetes
	nb.ClusterName, nb.Endpoint, nb.MaxPods = k.ClusterName, k.APIServer, k.MaxPods
	for key, v := range k.NodeLabels {
		nb.Labels[key] = v
	}
	for _, key := range sortedKeys(k.NodeTaints) {
		for _, ve := range k.NodeTaints[key] {
			value, effect, _ := strings.Cut(ve, ":")
			nb.Taints = append(nb.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
		}
	}
	return nb, nil
}

var (
	bootstrapArgs = regexp.MustCompile(`/etc/eks/bootstrap\.sh '([^']*)' --apiserver-endpoint '([^']*)'`)
	windowsArgs   = regexp.MustCompile(`-EKSClusterName '([^']*)' -APIServerEndpoint '([^']*)'`)
	quotedArg     = regexp.MustCompile(`(--[a-z-]+)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// parseBootstrapScript reads the AL2 bootstrap.sh or Windows
// Start-EKSBootstrap.ps1 call and its kubelet arguments.
func parseBootstrapScript(userData string, call *regexp.Regexp, extraFlag string) (NodeBootstrap, error) {
	nb := NodeBootstrap{Labels: map[string]string{}}
	m := call.FindStringSubmatch(userData)
	if m == nil {
		return nb, fmt.Errorf("no bootstrap call found in user data")
	}
	nb.ClusterName, nb.Endpoint = m[1], m[2]
	i := strings.Index(userData, extraFlag+" '")
	if i < 0 {
		return nb, nil
	}
	rest := userData[i+len(extraFlag)+2:]
	args := rest[:max(strings.IndexByte(rest, '\''), 0)]
	for _, a := range quotedArg.FindAllStringSubmatch(args, -1) {
		v := unquote(a[2])
		switch a[1] {
		case "--node-labels":
			nb.Labels = splitLabels(v)
		case "--register-with-taints":
			for _, t := range strings.Split(v, ",") {
				if t == "" {
					continue
				}
				kv, effect, _ := strings.Cut(t, ":")
				key, value, _ := strings.Cut(kv, "=")
				nb.Taints = append(nb.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
			}
		case "--max-pods":
			n, _ := strconv.Atoi(v)
			nb.MaxPods = int32(n)
		}
	}
	return nb, nil
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func splitLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}
