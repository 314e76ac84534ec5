package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/karpless/karpless/shared/apis/crds"
)

// version and commit are set by the Makefile's build of the CLI
// (-ldflags "-X main.version=... -X main.commit=..."), which builds with
// -buildvcs=false; a go install of a tagged module, or a go build in a
// checkout, fills them from the build info instead.
var (
	version = ""
	commit  = ""
)

// karpenterRelease is the Karpenter release whose users' API Karpless
// serves: the CRDs are generated to match its v1 ones
// (TestCRDsMatchKarpenterV1) and its suites are ported (docs/conformance.md).
const karpenterRelease = "v1.14.1"

var versionCommand = command{
	name:    "version",
	summary: "the CLI's version and commit, and the Karpenter API it serves",
	run:     runVersion,
}

// versionInfo is what karpless version prints.
type versionInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit,omitempty"`
	// CommitTime and Modified come from the build info, when the VCS was
	// stamped.
	CommitTime string `json:"commitTime,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	// Karpenter is the release whose API the CRDs serve; APIs are the
	// group/version and kinds of each CRD.
	Karpenter string   `json:"karpenter"`
	APIs      []string `json:"apis"`
	Go        string   `json:"go"`
	Platform  string   `json:"platform"`
}

func runVersion(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless version", "[-o text|json|yaml]")
	output := outputFlag(fs)
	if err := parseNoArgs(fs, args, output); err != nil {
		return err
	}
	v, err := buildVersion()
	if err != nil {
		return err
	}
	return write(c.out, *output, v, v.WriteText)
}

// buildVersion reads the version from the linker's -X values, else the
// build info, and the served APIs from the embedded CRDs.
func buildVersion() (versionInfo, error) {
	v := versionInfo{Version: version, Commit: commit, Karpenter: karpenterRelease, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if v.Commit == "" {
					v.Commit = s.Value
				}
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	all, err := crds.All()
	if err != nil {
		return v, err
	}
	kinds := map[string][]string{}
	for _, crd := range all {
		for _, ver := range crd.Spec.Versions {
			if ver.Served {
				gv := crd.Spec.Group + "/" + ver.Name
				kinds[gv] = append(kinds[gv], crd.Spec.Names.Kind)
			}
		}
	}
	for gv, ks := range kinds {
		sort.Strings(ks)
		v.APIs = append(v.APIs, gv+" ("+strings.Join(ks, ", ")+")")
	}
	sort.Strings(v.APIs)
	return v, nil
}

func (v versionInfo) WriteText(w io.Writer) error {
	commit := v.Commit
	switch {
	case commit == "":
		commit = "unknown (built without VCS stamping; the Makefile's build sets it)"
	case v.Modified:
		commit += " (with uncommitted changes)"
	}
	if v.CommitTime != "" {
		commit += ", " + v.CommitTime
	}
	_, err := fmt.Fprintf(w, "version: %s\ncommit: %s\nserves the API of Karpenter %s:\n  %s\ngo: %s %s\n",
		v.Version, commit, v.Karpenter, strings.Join(v.APIs, "\n  "), v.Go, v.Platform)
	return err
}
