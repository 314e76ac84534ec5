// Command crdvalidation adds to the CRDs controller-gen wrote the rules its
// markers cannot express, as Karpenter v1.14.1's hack/validation scripts
// (core and AWS provider) add them to its own: patterns and enums on
// corev1.Taint's fields, the pattern of label and kubelet map values, the
// NodePool's karpenter.sh/nodepool restriction on a requirement's key, and
// the looser NodeClaim condition schema. `make generate` and `make
// check-generated` run it on controller-gen's output:
//
//	go run ./hack/crdvalidation shared/apis/crds
//
// It rewrites each file the way controller-gen writes it (YAML of a sorted
// map), so an untouched file is unchanged, and fails when a path it edits
// is missing, so a schema change cannot silently drop a rule.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	// qualifiedName is Karpenter's pattern for taint keys and values.
	qualifiedName = `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	labelValue    = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	quantity      = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	// signalThreshold is a percentage or a quantity (the provider's
	// hack/validation/kubelet.sh, its empty alternative included).
	signalThreshold = `^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
)

// edit changes the schema node at path, a dotted list of property names
// below openAPIV3Schema where "[]" steps into items and "{}" into
// additionalProperties.
type edit struct {
	file, path string
	apply      func(node map[string]any)
}

func set(field string, value any) func(map[string]any) {
	return func(n map[string]any) { n[field] = value }
}

func unset(field string) func(map[string]any) {
	return func(n map[string]any) { delete(n, field) }
}

// insertRule puts a CEL rule at position i of the node's rules (where
// Karpenter's list has it).
func insertRule(i int, message, rule string) func(map[string]any) {
	return func(n map[string]any) {
		rules, _ := n["x-kubernetes-validations"].([]any)
		n["x-kubernetes-validations"] = slices.Insert(rules, min(i, len(rules)), any(map[string]any{"message": message, "rule": rule}))
	}
}

func taintEdits(file, list string) []edit {
	return []edit{
		{file, list + "[].key", set("minLength", json.Number("1"))},
		{file, list + "[].key", set("pattern", qualifiedName)},
		{file, list + "[].value", set("pattern", qualifiedName)},
		{file, list + "[].effect", set("enum", []any{"NoSchedule", "PreferNoSchedule", "NoExecute"})},
	}
}

func edits() []edit {
	const (
		pools   = "karpenter.sh_nodepools.yaml"
		claims  = "karpenter.sh_nodeclaims.yaml"
		classes = "karpenter.k8s.aws_ec2nodeclasses.yaml"
	)
	var out []edit
	for _, l := range []string{"spec.template.spec.taints", "spec.template.spec.startupTaints"} {
		out = append(out, taintEdits(pools, l)...)
	}
	for _, l := range []string{"spec.taints", "spec.startupTaints"} {
		out = append(out, taintEdits(claims, l)...)
	}
	return append(out,
		edit{pools, "spec.template.metadata.labels{}", set("maxLength", json.Number("63"))},
		edit{pools, "spec.template.metadata.labels{}", set("pattern", labelValue)},
		// On the key, where Karpenter has it: the NodeClaim's requirement
		// (the same Go type) may name the NodePool.
		edit{pools, "spec.template.spec.requirements[].key", insertRule(1, `label "karpenter.sh/nodepool" is restricted`, `self != "karpenter.sh/nodepool"`)},
		// Karpenter's NodeClaim conditions may have an empty reason and no
		// message (its hack/validation/status.sh).
		edit{claims, "status.conditions[].reason", unset("minLength")},
		edit{claims, "status.conditions[].reason", set("pattern", `^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$`)},
		edit{claims, "status.conditions[]", set("required", []any{"lastTransitionTime", "status", "type"})},
		edit{classes, "spec.kubelet.kubeReserved{}", set("pattern", quantity)},
		edit{classes, "spec.kubelet.systemReserved{}", set("pattern", quantity)},
		edit{classes, "spec.kubelet.evictionHard{}", set("pattern", signalThreshold)},
		edit{classes, "spec.kubelet.evictionSoft{}", set("pattern", signalThreshold)},
	)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdvalidation <dir of generated CRDs>")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdvalidation:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	byFile := map[string][]edit{}
	for _, e := range edits() {
		byFile[e.file] = append(byFile[e.file], e)
	}
	for file, es := range byFile {
		path := filepath.Join(dir, file)
		crd, err := read(path)
		if err != nil {
			return err
		}
		for _, e := range es {
			node, err := schemaAt(crd, e.path)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			e.apply(node)
		}
		if err := write(path, crd); err != nil {
			return err
		}
	}
	return nil
}

// read decodes a CRD as controller-gen encodes it: JSON numbers kept exact.
func read(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(bytes.TrimPrefix(b, []byte("---\n")))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var crd map[string]any
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	if err := d.Decode(&crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return crd, nil
}

// write encodes as controller-gen's genall.WriteYAML does.
func write(path string, crd map[string]any) error {
	b, err := yaml.Marshal(crd)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, append([]byte("---\n"), b...), 0o644)
}

func schemaAt(crd map[string]any, path string) (map[string]any, error) {
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) != 1 {
		return nil, errors.New("want exactly one version")
	}
	version, _ := versions[0].(map[string]any)
	schema, _ := version["schema"].(map[string]any)
	cur, ok := schema["openAPIV3Schema"].(map[string]any)
	if !ok {
		return nil, errors.New("no openAPIV3Schema")
	}
	for _, part := range strings.Split(path, ".") {
		name, suffix := part, ""
		if i := strings.IndexAny(part, "[{"); i >= 0 {
			name, suffix = part[:i], part[i:]
		}
		props, _ := cur["properties"].(map[string]any)
		if cur, ok = props[name].(map[string]any); !ok {
			return nil, fmt.Errorf("no property %q on the way to %s", name, path)
		}
		for ; suffix != ""; suffix = suffix[2:] {
			key := map[string]string{"[]": "items", "{}": "additionalProperties"}[suffix[:2]]
			if cur, ok = cur[key].(map[string]any); !ok {
				return nil, fmt.Errorf("no %s on the way to %s", key, path)
			}
		}
	}
	return cur, nil
}
