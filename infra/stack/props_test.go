package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPropsValidation(t *testing.T) {
	emptyAssets := t.TempDir()
	partial := t.TempDir()
	if err := os.MkdirAll(filepath.Join(partial, Provisioner), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(partial, Provisioner, "bootstrap"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		change func(*Props)
		want   []string // substrings of the error; none: valid
	}{
		{"defaults", func(p *Props) {}, nil},
		{"missing clusterName", func(p *Props) { p.ClusterName = "" }, []string{"clusterName is required", "-c clusterName="}},
		{"bad clusterName", func(p *Props) { p.ClusterName = "-bad name" }, []string{`clusterName "-bad name" is not a valid EKS cluster name`}},
		{"too long clusterName", func(p *Props) { p.ClusterName = strings.Repeat("a", 101) }, []string{"not a valid EKS cluster name"}},
		{"long clusterName needs nodeRoleName", func(p *Props) { p.ClusterName = strings.Repeat("a", 60) }, []string{"default node role name", "-c nodeRoleName="}},
		{"long clusterName with nodeRoleName", func(p *Props) { p.ClusterName = strings.Repeat("a", 100); p.NodeRoleName = "nodes" }, nil},
		{"bad account", func(p *Props) { p.Account = "1234" }, []string{`account "1234" is not a 12-digit`}},
		{"account without region", func(p *Props) { p.Region = "" }, []string{"account and region must be set together"}},
		{"env-agnostic", func(p *Props) { p.Account, p.Region = "", "" }, nil},
		{"bad region", func(p *Props) { p.Region = "Europe" }, []string{`region "Europe"`}},
		{"no assets", func(p *Props) { p.AssetsDir = emptyAssets }, []string{"provisioner/bootstrap is missing", "make lambdas", "bootstrap/bootstrap is missing"}},
		{"some assets", func(p *Props) { p.AssetsDir = partial }, []string{"disruption/bootstrap is missing"}},
		{"bad retention", func(p *Props) { p.LogRetentionDays = 10 }, []string{"logRetentionDays 10", "14, 30"}},
		{"bad crdHash", func(p *Props) { p.CRDHash = "has space" }, []string{"crdHash"}},
		{"metricsLevel full", func(p *Props) { p.MetricsLevel = "full" }, nil},
		{"bad metricsLevel", func(p *Props) { p.MetricsLevel = "Full" }, []string{`metricsLevel "Full" is not minimal`, "full"}},
		{"reservedConcurrency 1", func(p *Props) { p.ReservedConcurrency = 1 }, nil},
		{"economy", func(p *Props) { p.Responsiveness = "economy" }, nil},
		{"bad responsiveness", func(p *Props) { p.Responsiveness = "fast" }, []string{`responsiveness "fast" is not continuous`, "economy"}},
		{"batching", func(p *Props) { p.BatchIdleDuration, p.BatchMaxDuration = 500*time.Millisecond, 5*time.Second }, nil},
		{"batch idle above max", func(p *Props) { p.BatchIdleDuration, p.BatchMaxDuration = 20*time.Second, 5*time.Second },
			[]string{"batchIdleDuration (20s) must not exceed batchMaxDuration (5s)"}},
		{"batch max too long", func(p *Props) { p.BatchIdleDuration, p.BatchMaxDuration = time.Second, 2*time.Minute },
			[]string{"batchMaxDuration (2m0s) must be at most 1m0s"}},
		{"negative batch", func(p *Props) { p.BatchIdleDuration = -time.Second }, []string{"batchIdleDuration (-1s) and batchMaxDuration (10s) must be positive"}},
		{"logLevel debug", func(p *Props) { p.LogLevel = "debug" }, nil},
		{"mode shadow", func(p *Props) { p.Mode = "shadow" }, nil},
		{"bad mode", func(p *Props) { p.Mode = "dry-run" }, []string{`mode "dry-run" is not active`, "shadow"}},
		{"shadow with a default nodepool", func(p *Props) { p.Mode, p.InstallDefaultNodePool = "shadow", true }, []string{"mode shadow with installDefaultNodePool"}},
		{"shadow removing user objects", func(p *Props) { p.Mode, p.RemoveUserObjectsOnDelete = "shadow", true }, []string{"mode shadow with removeUserObjectsOnDelete"}},
		{"bad logLevel", func(p *Props) { p.LogLevel = "verbose" }, []string{`logLevel "verbose" is not one of debug, info, warn, error`}},
		{"alarm topic", func(p *Props) { p.AlarmTopicARN = "arn:aws:sns:eu-west-1:123456789012:oncall" }, nil},
		{"bad alarm topic", func(p *Props) { p.AlarmTopicARN = "oncall" }, []string{`alarmTopicArn "oncall" is not an SNS topic ARN`}},
		{"negative reservedConcurrency", func(p *Props) { p.ReservedConcurrency = -1 }, []string{"reservedConcurrency -1 is not valid", "positive number", "none"}},
		{"bad nodeRoleName", func(p *Props) { p.NodeRoleName = "no/slash" }, []string{`nodeRoleName "no/slash"`}},
		{"subnets need a security group", func(p *Props) { p.SubnetIDs = []string{"subnet-0123456789abcdef0"} }, []string{"pass securityGroupIds, or vpcId"}},
		{"vpcId needs subnets", func(p *Props) { p.VpcID = "vpc-0123456789abcdef0" }, []string{"subnetIds is required"}},
		{"bad ids", func(p *Props) {
			p.VpcID, p.SubnetIDs, p.SecurityGroupIDs = "vpc-x", []string{"subnet"}, []string{"group"}
		}, []string{`vpcId "vpc-x"`, `subnetIds: "subnet"`, `securityGroupIds: "group"`}},
		{"node roles ok", func(p *Props) {
			p.NodeRoles = []NodeRole{{Name: "TeamB"}, {Name: "Win", Windows: true, Create: true}, {Name: "Old", SkipAccessEntry: true}}
		}, nil},
		{"node role ARN", func(p *Props) {
			p.NodeRoles = []NodeRole{{Name: "arn:aws:iam::123456789012:role/x"}, {Name: "path/x"}}
		}, []string{`nodeRoles: "arn:aws:iam::123456789012:role/x": give the role's name, not an ARN`, `nodeRoles: "path/x"`}},
		{"bad node role name", func(p *Props) { p.NodeRoles = []NodeRole{{Name: "has space"}} }, []string{`nodeRoles: "has space" is not a valid IAM role name`}},
		{"empty node role name", func(p *Props) { p.NodeRoles = []NodeRole{{Windows: true}} }, []string{"nodeRoles: an entry has no role name"}},
		{"node role twice", func(p *Props) { p.NodeRoles = []NodeRole{{Name: "A"}, {Name: "a", Windows: true}} }, []string{`nodeRoles: "a" is listed twice`}},
		{"node role is nodeRoleName", func(p *Props) { p.NodeRoles = []NodeRole{{Name: "karpenterNodeRole-demo", Windows: true}} },
			[]string{`nodeRoles: "karpenterNodeRole-demo" is the node role (nodeRoleName) already`}},
		{"create without entry", func(p *Props) { p.NodeRoles = []NodeRole{{Name: "W", Create: true, SkipAccessEntry: true}} },
			[]string{`nodeRoles: "W": create and skipAccessEntry together`}},
		{"too many node roles", func(p *Props) {
			for i := range MaxNodeRoles + 1 {
				p.NodeRoles = append(p.NodeRoles, NodeRole{Name: fmt.Sprint("r", i)})
			}
		}, []string{"nodeRoles: at most 10 roles, got 11"}},
		{"vpc ok", func(p *Props) {
			p.SubnetIDs, p.SecurityGroupIDs = []string{"subnet-0123456789abcdef0"}, []string{"sg-01234567"}
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := defaultProps()
			c.change(&p)
			err := p.withDefaults().Validate()

			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// A missing cluster name is reported alone, not with follow-on errors
// about names derived from it.
func TestMissingClusterNameAlone(t *testing.T) {
	p := defaultProps()
	p.ClusterName = ""
	err := p.withDefaults().Validate()
	want := "clusterName is required: pass -c clusterName=<name of the EKS cluster>"
	if err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// NewStack refuses invalid props and defines nothing.
func TestNewStackRejectsInvalidProps(t *testing.T) {
	app := newApp()
	p := defaultProps()
	p.ClusterName = ""
	s, err := NewStack(app, "Karpless-bad", p)
	if err == nil || s != nil {
		t.Fatalf("NewStack = %v, %v; want an error", s, err)
	}
	if !strings.Contains(err.Error(), `karpless stack "Karpless-bad": clusterName is required`) {
		t.Errorf("error: %v", err)
	}
	if n := len(*app.Node().Children()); n != 0 {
		t.Errorf("app has %d children after a rejected stack", n)
	}
}

func TestParseNodeRole(t *testing.T) {
	cases := []struct {
		in   string
		want NodeRole
		err  string
	}{
		{"TeamB", NodeRole{Name: "TeamB"}, ""},
		{" Win : windows ", NodeRole{Name: "Win", Windows: true}, ""},
		{"Win:Windows:create", NodeRole{Name: "Win", Windows: true, Create: true}, ""},
		{"Old:skipAccessEntry", NodeRole{Name: "Old", SkipAccessEntry: true}, ""},
		{"Win:linux", NodeRole{}, `nodeRoles: "Win:linux": unknown modifier "linux" (use windows, create, skipAccessEntry or path=/<path>/ after the role name, e.g. MyWindowsNodes:windows)`},
		{"Win:", NodeRole{}, `unknown modifier ""`},
	}
	for _, c := range cases {
		got, err := ParseNodeRole(c.in)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseNodeRole(%q) error %v, want %q", c.in, err, c.err)
			}
		case err != nil:
			t.Errorf("ParseNodeRole(%q): %v", c.in, err)
		case got != c.want:
			t.Errorf("ParseNodeRole(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
