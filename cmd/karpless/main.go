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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
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
	versionCommand,
}

// errUsage means the arguments were wrong; the usage was printed already
// (on standard error). It exits 2. flag.ErrHelp means help was asked for
// and printed (on standard output); it exits 0. Any other error exits 1.
var errUsage = errors.New("usage")

// Exit statuses, as documented in docs/cli.md ("Exit status").
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cli{out: os.Stdout, err: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, c *cli, args []string) int {
	switch {
	case len(args) == 0:
		usage(c.err)
		return exitUsage
	case isHelp(args[0]):
		usage(c.out)
		return exitOK
	case args[0] == "help":
		// karpless help <command> [<subcommand>], as kubectl help does.
		if len(args) == 1 {
			usage(c.out)
			return exitOK
		}
		args = append(append([]string{}, args[1:]...), "--help")
	}
	for _, cmd := range commands {
		if cmd.name == args[0] {
			return exitCode(c, cmd.name, cmd.run(ctx, c, args[1:]))
		}
	}
	fmt.Fprintf(c.err, "karpless: unknown command %q\n\n", args[0])
	usage(c.err)
	return exitUsage
}

// exitCode maps a command's error to the exit status, printing a failure.
func exitCode(c *cli, name string, err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	default:
		fmt.Fprintf(c.err, "karpless %s: %v\n", name, err)
		return exitFailure
	}
}

// isHelp is an argument that asks for help, in any of the forms kubectl
// and Go's flag package accept.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--help", "-help", "--h":
		return true
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "karpless: Karpenter's API and behaviour as AWS Lambda functions; this is the operator's CLI.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: karpless <command> [<subcommand>] [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "karpless <command> --help" (or "karpless help <command>") for its subcommands and flags.`)
	fmt.Fprintln(w, "Flags are written --name value or --name=value; one-letter flags -o json, -n ns, -v.")
	fmt.Fprintln(w, "Commands that read take -o text|json|yaml.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitStatusHelp)
}

// exitStatusHelp ends every usage: what scripts can rely on.
const exitStatusHelp = `exit status: 0 done (help included), 1 failed (the message on standard error says why), 2 wrong arguments (the usage is printed on standard error)`

// subcommand is one verb of a group.
type subcommand struct {
	name    string
	args    string // synopsis of the arguments, for usage
	summary string
	run     func(ctx context.Context, c *cli, args []string) error
	// aliases are other names that run it, as kubectl accepts plurals and
	// short names of resources.
	aliases []string
}

// is reports whether the subcommand answers to name (case-insensitive,
// as kubectl's resource names).
func (s subcommand) is(name string) bool {
	name = strings.ToLower(name)
	return name == s.name || slices.Contains(s.aliases, name)
}

// dispatch runs the subcommand named by args[0].
func dispatch(ctx context.Context, c *cli, group string, subs []subcommand, args []string) error {
	switch {
	case len(args) == 0:
		groupUsage(c.err, group, subs)
		return errUsage
	case isHelp(args[0]):
		groupUsage(c.out, group, subs)
		return flag.ErrHelp
	case args[0] == "help":
		if len(args) == 1 {
			groupUsage(c.out, group, subs)
			return flag.ErrHelp
		}
		args = []string{args[1], "--help"}
	}
	for _, s := range subs {
		if s.is(args[0]) {
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
		name := s.name
		if len(s.aliases) > 0 {
			name += " (" + strings.Join(s.aliases, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-10s %s\n      %s\n", name, s.args, s.summary)
	}
	fmt.Fprintf(w, "\nRun \"karpless %s <subcommand> --help\" for its flags.\n\n%s\n", group, exitStatusHelp)
}

// helpFlag is -h and --help of every flag set: help goes to standard
// output and exits 0, unlike a usage error.
type helpFlag struct {
	asked bool
	out   io.Writer
}

func (h *helpFlag) String() string   { return "false" }
func (h *helpFlag) IsBoolFlag() bool { return true }
func (h *helpFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	h.asked = b
	return err
}

// flags makes a flag set that reports errors on c.err and help on c.out,
// and lists its flags in the --name form the docs use.
func flags(c *cli, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.err)
	h := &helpFlag{out: c.out}
	fs.Var(h, "h", "help")
	fs.Var(h, "help", "help")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s %s\n", name, synopsis)
		printFlags(w, fs)
		fmt.Fprintf(w, "\n%s\n", exitStatusHelp)
	}
	return fs
}

// printFlags lists the flags as --name (one-letter ones as -n), with their
// type and default, as the docs write them.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(*helpFlag); ok {
			return
		}
		if n == 0 {
			fmt.Fprintln(tw, "\nflags:")
		}
		n++
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		typ, help := flag.UnquoteUsage(f)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			typ = ""
		}
		switch f.DefValue {
		case "", "false", "0", "0s", "[]":
		default:
			if typ == "string" {
				help += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				help += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintf(tw, "  %s%s %s\t%s\n", dash, f.Name, typ, help)
	})
	fmt.Fprintf(tw, "  -h, --help\tthis help, on standard output\n")
	_ = tw.Flush()
}

// parse parses flags placed before or after the positional arguments. It
// returns flag.ErrHelp once the help is printed on standard output, and
// an errUsage error once the flag error and the usage are printed on
// standard error.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if h, ok := fs.Lookup("help").Value.(*helpFlag); ok && h.asked {
		fs.SetOutput(h.out)
		fs.Usage()
		return nil, flag.ErrHelp
	}
	return pos, nil
}

func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
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

// badUsage prints the usage on standard error and returns errUsage: the
// arguments parsed but are not what the command takes.
func badUsage(fs *flag.FlagSet, format string, args ...any) error {
	if format != "" {
		fmt.Fprintf(fs.Output(), format+"\n", args...)
	}
	fs.Usage()
	return errUsage
}
