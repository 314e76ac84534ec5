package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/karpless/karpless/internal/docscheck"
)

// cliUse finds a command line of the CLI in the docs' code: karpless, its
// command, and the word after it (a subcommand of a group).
var cliUse = regexp.MustCompile("(?m)(?:^|[\\s;&|(`$])karpless[ \\t]+([a-z][a-z-]*)(?:[ \\t]+([a-z][a-z-]*))?")

// subcommandLine is a subcommand's line in a group's usage, with its
// aliases in parentheses: "  pod (pods, po) [flags] ...".
var subcommandLine = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)(?: \(([a-z, -]+)\))?`)

// cliCommands are the commands and, for a group, its subcommands, as
// `--help` prints them; aliases maps "command alias" to the subcommand.
func cliCommands(t *testing.T) (cmds map[string][]string, aliases map[string]string) {
	t.Helper()
	cmds, aliases = map[string][]string{}, map[string]string{}
	for _, cmd := range commands {
		var stdout, stderr bytes.Buffer
		_ = cmd.run(context.Background(), &cli{out: &stdout, err: &stderr}, []string{"--help"})
		help := stdout.String() + stderr.String()
		cmds[cmd.name] = nil
		if _, subs, ok := strings.Cut(help, "subcommands:"); ok {
			for _, m := range subcommandLine.FindAllStringSubmatch(subs, -1) {
				cmds[cmd.name] = append(cmds[cmd.name], m[1])
				for _, a := range strings.Split(m[2], ", ") {
					if a != "" {
						aliases[cmd.name+" "+a] = m[1]
					}
				}
			}
			if len(cmds[cmd.name]) == 0 {
				t.Fatalf("karpless %s --help lists no subcommand:\n%s", cmd.name, help)
			}
		}
	}
	return cmds, aliases
}

// TestDocsNameTheCLI holds the docs to the CLI: every `karpless <command>
// [<subcommand>]` in a page's code exists (an alias counts as its
// subcommand), and every command and subcommand appears in some page's
// code.
func TestDocsNameTheCLI(t *testing.T) {
	cmds, aliases := cliCommands(t)
	mentioned := map[string]bool{}
	for _, p := range docscheck.Pages(t) {
		for _, code := range docscheck.Code(p.Text) {
			for _, m := range cliUse.FindAllStringSubmatch(code, -1) {
				if m[1] == "help" {
					// karpless help <command> [<subcommand>] is the
					// command's --help (TestDispatch).
					continue
				}
				subs, ok := cmds[m[1]]
				if !ok {
					t.Errorf("%s names `karpless %s`, which is not a command", p.Path, m[1])
					continue
				}
				mentioned[m[1]] = true
				if len(subs) == 0 || m[2] == "" {
					continue
				}
				if sub, ok := aliases[m[1]+" "+m[2]]; ok {
					m[2] = sub
				}
				if !contains(subs, m[2]) {
					t.Errorf("%s names `karpless %s %s`, which is not a subcommand (%s)", p.Path, m[1], m[2], strings.Join(subs, ", "))
					continue
				}
				mentioned[m[1]+" "+m[2]] = true
			}
		}
	}
	for name, subs := range cmds {
		if !mentioned[name] {
			t.Errorf("`karpless %s` is in no page's code", name)
		}
		for _, s := range subs {
			if !mentioned[name+" "+s] {
				t.Errorf("`karpless %s %s` is in no page's code", name, s)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
