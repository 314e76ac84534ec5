// Package shared_test checks that the folders of shared/ keep to their
// layers: a package imports only its own layer and the ones above it.
package shared_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/karpless/karpless/shared/"

// layers, from the top: the API types, the pure core, the AWS and
// Kubernetes edges, what every function is built from, the seam to EC2,
// the ticks, the wiring of engines into handlers, and local tooling. The
// first matching prefix decides.
var layers = []struct {
	prefix string
	layer  int
}{
	{"apis/", 0},
	{"core/", 1},
	{"aws/", 2},
	{"kube/", 2},
	{"kube", 2},
	{"function/", 3},
	{"cloud", 4},
	{"ticks/", 5},
	{"app", 6},
	{"local/", 7},
}

func layerOf(pkg string) (int, bool) {
	rel := strings.TrimPrefix(pkg, module)
	for _, l := range layers {
		if strings.HasPrefix(rel, l.prefix) {
			return l.layer, true
		}
	}
	return 0, false
}

func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] == strings.TrimSuffix(module, "/") {
			continue
		}
		pkg := fields[0]
		from, ok := layerOf(pkg)
		if !ok {
			t.Errorf("%s is in no layer: give its folder one (here and in docs/concepts.md)", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if to, ok := layerOf(imp); ok && to > from {
				t.Errorf("%s imports %s, a layer below it", strings.TrimPrefix(pkg, module), strings.TrimPrefix(imp, module))
			}
		}
	}
}
