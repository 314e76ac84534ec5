// Command karpless is the operator CLI. `karpless local ...` runs Karpless on
// this machine against a local API server and the AWS emulator; one file per command group.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// cli carries what every command writes to.
type cli struct {
	out, err io.Writer
}

func (c *cli) printf(format string, args ...any) { fmt.Fprintf(c.out, format, args...) }

// command is one top-level command (a group of subcommands, usually).
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

// commands are the command groups, each in its own file.
var commands = []command{
	localCommand,
	explainCommand,
	simulateCommand,
	snapshotCommand,
	demoCommand,
	soakCommand,
	pauseCommand,
	resumeCommand,
	migrateCommand,
	shadowCommand,
}

// errUsage means the arguments were wrong; the usage was printed already.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cli{out: os.Stdout, err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, c *cli, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(c.err)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			err := cmd.run(ctx, c, args[1:])
			switch {
			case err == nil:
				return 0
			case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
				return 2
			default:
				fmt.Fprintf(c.err, "karpless %s: %v\n", cmd.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(c.err, "karpless: unknown command %q\n\n", args[0])
	usage(c.err)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: karpless <command> [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", cmd.name, cmd.summary)
	}
}

// subcommand is one verb of a group.
type subcommand struct {
	name    string
	args    string // synopsis of the arguments, for usage
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
}

// dispatch runs the subcommand named by args[0].
func dispatch(ctx context.Context, c *cli, group string, subs []subcommand, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		groupUsage(c.err, group, subs)
		return errUsage
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, c, args[1:])
		}
	}
	fmt.Fprintf(c.err, "karpless %s: unknown subcommand %q\n\n", group, args[0])
	groupUsage(c.err, group, subs)
	return errUsage
}

func groupUsage(w io.Writer, group string, subs []subcommand) {
	fmt.Fprintf(w, "usage: karpless %s <subcommand> [flags]\n\nsubcommands:\n", group)
	for _, s := range subs {
		fmt.Fprintf(w, "  %-10s %s\n      %s\n", s.name, s.args, s.summary)
	}
}

// flags makes a flag set that reports errors on c.err.
func flags(c *cli, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.err)
	fs.Usage = func() {
		fmt.Fprintf(c.err, "usage: %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags placed before or after the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			continue
		}
	}
}
