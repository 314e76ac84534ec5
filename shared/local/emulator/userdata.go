package emulator

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// bootConfig is what the node's bootstrap would hand the kubelet: the
// labels and taints it registers with and the settings that change
// allocatable.
type bootConfig struct {
	// Family is the AMI family the user data is written for (AL2023, AL2,
	// Bottlerocket, Windows, or "" when unknown).
	Family         string
	ClusterName    string
	Labels         map[string]string
	Taints         []corev1.Taint
	MaxPods        *int32
	KubeReserved   map[string]string
	SystemReserved map[string]string
	EvictionHard   map[string]string
}

// parseUserData reads the user data of the EKS AMI families: AL2023's
// nodeadm NodeConfig (MIME part application/node.eks.aws or bare YAML),
// AL2's bootstrap.sh --kubelet-extra-args, Bottlerocket's TOML settings,
// Windows' Start-EKSBootstrap.ps1 -KubeletExtraArgs.
// Anything it cannot read yields no labels or taints, like a kubelet
// started without them.
func parseUserData(ud, family string) bootConfig {
	b := bootConfig{Labels: map[string]string{}}
	trimmed := strings.TrimSpace(ud)
	switch {
	case trimmed == "":
	case strings.HasPrefix(trimmed, "MIME-Version:") || strings.HasPrefix(trimmed, "Content-Type:"):
		b.readMIME(trimmed)
	case strings.HasPrefix(trimmed, "<powershell>"):
		b.Family = "Windows"
		b.readWindowsBootstrap(trimmed)
	case family == "Bottlerocket" || strings.Contains(trimmed, "[settings") || strings.HasPrefix(trimmed, "settings.") || strings.Contains(trimmed, "\nsettings."):
		b.Family = "Bottlerocket"
		b.readBottlerocket(trimmed)
	case strings.Contains(trimmed, "kind: NodeConfig"):
		b.Family = "AL2023"
		b.readNodeConfigs(trimmed)
	case strings.Contains(trimmed, "/etc/eks/bootstrap.sh"):
		b.Family = "AL2"
		b.readBootstrapScript(trimmed)
	}
	return b
}

func (b *bootConfig) readMIME(ud string) {
	msg, err := mail.ReadMessage(strings.NewReader(strings.ReplaceAll(ud, "\r\n", "\n")))
	if err != nil {
		return
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := r.NextPart()
		if err != nil {
			return
		}
		body, _ := io.ReadAll(part)
		ct, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch {
		case ct == "application/node.eks.aws":
			b.Family = "AL2023"
			b.readNodeConfigs(string(body))
		case strings.Contains(string(body), "/etc/eks/bootstrap.sh"):
			b.Family = "AL2"
			b.readBootstrapScript(string(body))
		}
	}
}

// nodeConfig is the part of nodeadm's NodeConfig that shapes registration.
type nodeConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Cluster struct {
			Name string `json:"name"`
		} `json:"cluster"`
		Kubelet struct {
			Config map[string]json.RawMessage `json:"config"`
			Flags  []string                   `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// readNodeConfigs merges the NodeConfig documents of a part, in order, as
// nodeadm does: later documents add labels and taints and override settings.
func (b *bootConfig) readNodeConfigs(s string) {
	for _, doc := range strings.Split("\n"+s, "\n---") {
		var nc nodeConfig
		if yaml.Unmarshal([]byte(doc), &nc) != nil || nc.Kind != "NodeConfig" {
			continue
		}
		if nc.Spec.Cluster.Name != "" {
			b.ClusterName = nc.Spec.Cluster.Name
		}
		cfg := nc.Spec.Kubelet.Config
		if raw, ok := cfg["maxPods"]; ok {
			var n int32
			if json.Unmarshal(raw, &n) == nil {
				b.MaxPods = &n
			}
		}
		if raw, ok := cfg["registerWithTaints"]; ok {
			var taints []corev1.Taint
			if json.Unmarshal(raw, &taints) == nil {
				b.Taints = append(b.Taints, taints...)
			}
		}
		for key, dst := range map[string]*map[string]string{"kubeReserved": &b.KubeReserved, "systemReserved": &b.SystemReserved, "evictionHard": &b.EvictionHard} {
			if raw, ok := cfg[key]; ok {
				var m map[string]string
				if json.Unmarshal(raw, &m) == nil {
					*dst = m
				}
			}
		}
		b.readFlags(nc.Spec.Kubelet.Flags)
	}
}

// readFlags reads kubelet flags: --node-labels, --register-with-taints,
// --max-pods, in the forms Karpenter writes (quoted or not).
func (b *bootConfig) readFlags(flags []string) {
	for _, f := range flags {
		name, value, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		value = unquote(value)
		switch name {
		case "--node-labels":
			for _, kv := range strings.Split(value, ",") {
				if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && k != "" {
					b.Labels[k] = v
				}
			}
		case "--register-with-taints":
			for _, t := range strings.Split(value, ",") {
				if taint, ok := parseTaint(strings.TrimSpace(t)); ok {
					b.Taints = append(b.Taints, taint)
				}
			}
		case "--max-pods":
			if n, err := strconv.ParseInt(value, 10, 32); err == nil {
				n32 := int32(n)
				b.MaxPods = &n32
			}
		}
	}
}

// parseTaint reads key[=value]:Effect.
func parseTaint(s string) (corev1.Taint, bool) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Taint{}, false
	}
	k, v, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}, true
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		if s[0] == '"' {
			if u, err := strconv.Unquote(s); err == nil {
				return u
			}
		}
		return s[1 : len(s)-1]
	}
	return s
}

// readBootstrapScript reads AL2's /etc/eks/bootstrap.sh arguments.
func (b *bootConfig) readBootstrapScript(s string) {
	s = strings.ReplaceAll(s, "\\\n", " ")
	for _, line := range strings.Split(s, "\n") {
		if !strings.Contains(line, "/etc/eks/bootstrap.sh") {
			continue
		}
		args := shellWords(line[strings.Index(line, "/etc/eks/bootstrap.sh"):])
		for i := 0; i < len(args); i++ {
			switch {
			case i == 1 && !strings.HasPrefix(args[i], "-"):
				b.ClusterName = args[i]
			case args[i] == "--kubelet-extra-args" && i+1 < len(args):
				b.readFlags(shellWords(args[i+1]))
				i++
			case args[i] == "--use-max-pods" && i+1 < len(args):
				i++
			}
		}
	}
}

// readWindowsBootstrap reads the arguments of the EKS Windows AMI's
// Start-EKSBootstrap.ps1 as Karpenter calls it:
//
//	& $EKSBootstrapScriptFile -EKSClusterName 'c' -APIServerEndpoint 'e' ... -KubeletExtraArgs '--node-labels="..." ...'
//
// Karpenter single-quotes each value and escapes nothing inside, so the
// words are what shellWords reads.
func (b *bootConfig) readWindowsBootstrap(s string) {
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		at := strings.Index(line, "-EKSClusterName")
		if at < 0 {
			continue
		}
		args := shellWords(line[at:])
		for i := 0; i+1 < len(args); i++ {
			switch strings.ToLower(args[i]) {
			case "-eksclustername":
				b.ClusterName = args[i+1]
				i++
			case "-kubeletextraargs":
				b.readFlags(shellWords(args[i+1]))
				i++
			}
		}
	}
}

// shellWords splits a command line, honouring single and double quotes
// (enough for what Karpenter writes, not a shell).
func shellWords(s string) []string {
	var out []string
	var cur bytes.Buffer
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' && i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// readBottlerocket reads the TOML subset Bottlerocket user data uses:
// [table] headers, dotted and quoted keys, strings, integers, booleans and
// one-line arrays of strings.
func (b *bootConfig) readBottlerocket(s string) {
	table := ""
	for _, raw := range strings.Split(s, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "[") && !strings.HasPrefix(line, "[[") {
			table = strings.Join(tomlKey(strings.Trim(line, "[] ")), ".")
			continue
		}
		k, v, ok := cutTOMLAssignment(line)
		if !ok {
			continue
		}
		path := tomlKey(k)
		full := path
		if table != "" {
			full = append(tomlKey(table), path...)
		}
		b.bottlerocketSetting(full, strings.TrimSpace(v))
	}
}

func (b *bootConfig) bottlerocketSetting(path []string, v string) {
	if len(path) < 3 || path[0] != "settings" || path[1] != "kubernetes" {
		return
	}
	switch {
	case len(path) == 3 && path[2] == "cluster-name":
		b.ClusterName = tomlString(v)
	case len(path) == 3 && path[2] == "max-pods":
		if n, err := strconv.ParseInt(v, 10, 32); err == nil {
			n32 := int32(n)
			b.MaxPods = &n32
		}
	case len(path) == 4 && path[2] == "node-labels":
		b.Labels[path[3]] = tomlString(v)
	case len(path) == 4 && path[2] == "node-taints":
		// Each value is "value:Effect"; several per key form an array.
		for _, item := range tomlStrings(v) {
			val, effect, ok := strings.Cut(item, ":")
			if !ok {
				continue
			}
			b.Taints = append(b.Taints, corev1.Taint{Key: path[3], Value: val, Effect: corev1.TaintEffect(effect)})
		}
	case len(path) == 4 && (path[2] == "kube-reserved" || path[2] == "system-reserved" || path[2] == "eviction-hard"):
		dst := map[string]*map[string]string{"kube-reserved": &b.KubeReserved, "system-reserved": &b.SystemReserved, "eviction-hard": &b.EvictionHard}[path[2]]
		if *dst == nil {
			*dst = map[string]string{}
		}
		(*dst)[path[3]] = tomlString(v)
	}
}

// cutTOMLAssignment splits key = value at the first = outside quotes.
func cutTOMLAssignment(line string) (string, string, bool) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '=':
			return strings.TrimSpace(line[:i]), line[i+1:], true
		}
	}
	return "", "", false
}

// tomlKey splits a dotted key, keeping quoted parts whole.
func tomlKey(k string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '.':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

func tomlString(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.Index(v, " #"); i >= 0 && (v[0] != '"' && v[0] != '\'') {
		v = strings.TrimSpace(v[:i])
	}
	return unquote(v)
}

func tomlStrings(v string) []string {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, "[") {
		return []string{tomlString(v)}
	}
	var out []string
	for _, item := range strings.Split(strings.Trim(v, "[]"), ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, tomlString(item))
		}
	}
	return out
}
