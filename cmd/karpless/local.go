package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/karpless/karpless/events"
	"github.com/karpless/karpless/shared/app"
	"github.com/karpless/karpless/shared/local/emulator"
	"github.com/karpless/karpless/shared/local/eventsource"
)

var localCommand = command{
	name:    "local",
	summary: "run Karpless on this machine: a local API server, the AWS emulator, the functions' real handlers",
	run: func(ctx context.Context, c *cli, args []string) error {
		return dispatch(ctx, c, "local", localSubcommands, args)
	},
}

var localSubcommands []subcommand

func init() {
	// Assigned here because localUp's usage refers back to the table.
	localSubcommands = []subcommand{
		{"up", "[--dir " + DefaultLocalDir + "] [--scheduler] [--controller-manager] [--bootstrap] [--schedules] [--interruption] [--responsiveness continuous|economy] [--log-level info]",
			"start the API server, the AWS emulator and the fake kubelet in the foreground, and run the functions on their triggers as deployed; Ctrl-C stops everything", localUp, nil},
		{"tick", "[--dir d] [--timeout 60s] <" + strings.Join(functionNames(), "|") + ">",
			"run one invocation of a function's real handler against the running environment", localTick, nil},
		{"inject", "[--dir d] <spot-interruption|rebalance|state-change <state>|scheduled-change|capacity-reservation-interruption> <instance-id>...",
			"put an EventBridge-shaped interruption event in the interruption queue (through the real SQS client)", localInject, nil},
		{"instances", "[--dir d] [--all] [-o text|json|yaml]", "list the emulator's instances with their tags and nodes", localInstances, nil},
		{"fault", "[--dir d] <" + strings.Join(faultKinds, "|") + "> [flags] (list: [-o text|json|yaml])",
			"inject a fault into the running emulator, list or clear them", localFault, nil},
	}
}

func dirFlag(fs interface {
	String(name, value, usage string) *string
}) *string {
	return fs.String("dir", DefaultLocalDir, "the directory of the local environment")
}

// newRequestID is a random UUID-shaped id for invocations and events.
func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s := hex.EncodeToString(b)
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// localTick runs one invocation of a function's handler, as Lambda would:
// the function's identity, its environment, a deadline, a payload.
func localTick(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless local tick", "[flags] <function>")
	dir := dirFlag(fs)
	timeout := fs.Duration("timeout", time.Minute, "the invocation's deadline, as the Lambda timeout")
	window := fs.Duration("watch-window", 0, "how long the provisioner keeps watching pending pods (0 = one pass)")
	logLevel := fs.String("log-level", "info", "the function's LOG_LEVEL")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badUsage(fs, "")
	}
	name := pos[0]
	fn, ok := handlers[name]
	if !ok {
		return fmt.Errorf("unknown function %q; available: %s", name, strings.Join(functionNames(), ", "))
	}
	st, err := readState(*dir)
	if err != nil {
		return err
	}
	lookup := functionLookup(st, name, map[string]string{"WATCH_WINDOW": window.String(), "LOG_LEVEL": *logLevel})
	ctx, cancel, reqID := invocationContext(ctx, st, name, *timeout)
	defer cancel()
	start := time.Now()
	appEnv, err := app.Load(ctx, lookup)
	if err != nil {
		return fmt.Errorf("loading the %s function: %w", name, err)
	}
	h := fn.handler(appEnv)
	switch fn.trigger {
	case schedule:
		out, err := h.Invoke(ctx, events.NewScheduledTick(reqID, time.Now()))
		if err != nil {
			return fmt.Errorf("%s invocation %s failed after %s: %w", name, reqID, time.Since(start).Round(time.Millisecond), err)
		}
		c.printf("%s invocation %s done in %s:\n%s\n", name, reqID, time.Since(start).Round(time.Millisecond), indentJSON(out))
	case queue:
		m := eventsource.Mapping{
			SQS: appEnv.AWS.SQS, QueueURL: st.InterruptionQueueURL, Region: st.Region, BatchSize: 10, VisibilityTimeout: 30 * time.Second,
			QueueARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", st.Region, emulator.DefaultAccountID, st.ClusterName),
		}
		var raw []byte
		o, err := m.PollOnce(ctx, func(ctx context.Context, batch lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
			payload, err := json.Marshal(batch)
			if err != nil {
				return lambdaevents.SQSEventResponse{}, err
			}
			out, err := h.Invoke(ctx, payload)
			if err != nil {
				return lambdaevents.SQSEventResponse{}, err
			}
			raw = out
			var resp lambdaevents.SQSEventResponse
			return resp, json.Unmarshal(out, &resp)
		})
		if err != nil {
			return err
		}
		if o.Received == 0 {
			c.printf("the interruption queue is empty: nothing to invoke %s with (Lambda's event source mapping would not either)\n", name)
			return nil
		}
		if o.HandlerErr != nil {
			return fmt.Errorf("%s invocation %s failed; the batch of %d stays in the queue: %w", name, reqID, o.Received, o.HandlerErr)
		}
		c.printf("%s invocation %s done in %s: %d message(s), %d deleted, %d left for retry\n%s\n",
			name, reqID, time.Since(start).Round(time.Millisecond), o.Received, o.Deleted, o.Failed, indentJSON(raw))
	}
	return nil
}

func indentJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return string(out)
}

// localInject sends interruption events through SQS, as EventBridge would.
func localInject(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless local inject", "[flags] <kind> [state] <instance-id>...")
	dir := dirFlag(fs)
	after := fs.Duration("terminate-after", 2*time.Minute, "for spot and capacity-reservation interruptions: terminate the instances this long after the warning, as EC2 does (0 = leave them running)")
	code := fs.String("code", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "the AWS Health eventTypeCode of a scheduled change")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return badUsage(fs, "")
	}
	kind, ids, state := emulator.EventKind(pos[0]), pos[1:], ""
	if kind == emulator.EventStateChange {
		if len(pos) < 3 {
			return fmt.Errorf("state-change needs a state (pending, running, stopping, stopped, shutting-down, terminated) before the instance ids")
		}
		state, ids = pos[1], pos[2:]
	}
	for _, id := range ids {
		if !events.ValidInstanceID(id) {
			return fmt.Errorf("%q is not an instance id", id)
		}
	}
	st, err := readState(*dir)
	if err != nil {
		return err
	}
	now := time.Now()
	var bodies [][]byte
	switch kind {
	case emulator.EventSpotInterruption:
		for _, id := range ids {
			bodies = append(bodies, events.NewSpotInterruption(newRequestID(), id, now))
		}
	case emulator.EventCapacityReservationInterruption:
		for _, id := range ids {
			bodies = append(bodies, events.NewCapacityReservationInterruption(newRequestID(), id, now))
		}
	case emulator.EventRebalance:
		for _, id := range ids {
			bodies = append(bodies, events.NewRebalanceRecommendation(newRequestID(), id, now))
		}
	case emulator.EventStateChange:
		for _, id := range ids {
			bodies = append(bodies, events.NewStateChange(newRequestID(), id, state, now))
		}
	case emulator.EventScheduledChange:
		bodies = append(bodies, events.NewScheduledChange(newRequestID(), *code, ids, now))
	default:
		return fmt.Errorf("unknown event kind %q (known: %v)", kind, emulator.EventKinds)
	}
	op := st.Identities["operator"]
	// This stands in for EventBridge, which retries a delivery to its
	// target for up to a day: a throttling burst of the emulated SQS (up
	// to four calls) must not lose the event, as the SDK's default three
	// attempts would.
	client := sqs.NewFromConfig(aws.Config{
		Region: st.Region, BaseEndpoint: aws.String(st.Endpoint), HTTPClient: emulator.HTTPClient(),
		Credentials:      credentials.NewStaticCredentialsProvider(op.AccessKeyID, op.SecretAccessKey, ""),
		RetryMaxAttempts: 10,
	})
	for _, b := range bodies {
		out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.InterruptionQueueURL), MessageBody: aws.String(string(b))})
		if err != nil {
			return fmt.Errorf("sending the event: %w", err)
		}
		c.printf("sent %s event %s to %s\n", kind, aws.ToString(out.MessageId), st.InterruptionQueueURL)
	}
	if (kind == emulator.EventSpotInterruption || kind == emulator.EventCapacityReservationInterruption) && *after > 0 {
		if err := (emulator.Admin{URL: st.Endpoint}).TerminateAfter(ctx, ids, *after); err != nil {
			return err
		}
		c.printf("the instance(s) will be terminated in %s, as EC2 does after the warning (--terminate-after=0 to keep them)\n", *after)
	}
	return nil
}

// localInstances lists the instances a running emulator has.
func localInstances(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless local instances", "[flags]")
	dir := dirFlag(fs)
	all := fs.Bool("all", false, "include terminated instances")
	output := outputFlag(fs)
	if err := parseNoArgs(fs, args, output); err != nil {
		return err
	}
	st, err := readState(*dir)
	if err != nil {
		return err
	}
	list, err := (emulator.Admin{URL: st.Endpoint}).Instances(ctx)
	if err != nil {
		return err
	}
	shown := instanceList{Instances: []instanceRow{}}
	for _, i := range list {
		if i.State == emulator.StateTerminated && !*all {
			continue
		}
		shown.Instances = append(shown.Instances, instanceRow{
			ID: i.ID, InstanceType: i.InstanceType, Zone: i.Zone, CapacityType: i.CapacityType, State: i.State, Node: i.NodeName, Tags: i.Tags,
		})
	}
	return write(c.out, *output, shown, shown.WriteText)
}

// instanceList is what local instances prints; -o json|yaml gives every
// tag, the table the Karpenter ones.
type instanceList struct {
	Instances []instanceRow `json:"instances"`
}

type instanceRow struct {
	ID           string            `json:"id"`
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone"`
	CapacityType string            `json:"capacityType"`
	State        string            `json:"state"`
	Node         string            `json:"node,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
}

func (l instanceList) WriteText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INSTANCE\tTYPE\tZONE\tCAPACITY\tSTATE\tNODE\tTAGS")
	for _, i := range l.Instances {
		var tags []string
		for _, k := range []string{"karpenter.sh/nodepool", "karpenter.sh/nodeclaim", "karpenter.k8s.aws/ec2nodeclass"} {
			if v, ok := i.Tags[k]; ok {
				tags = append(tags, k+"="+v)
			}
		}
		sort.Strings(tags)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, i.InstanceType, i.Zone, i.CapacityType, i.State, orDash(i.Node), strings.Join(tags, ","))
	}
	return w.Flush()
}

// faultList is what local fault list prints: each rule as the emulator
// describes it.
type faultList struct {
	Faults []string `json:"faults"`
}

func (l faultList) WriteText(w io.Writer) error {
	if len(l.Faults) == 0 {
		_, err := fmt.Fprintln(w, "no faults")
		return err
	}
	for _, f := range l.Faults {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// faultKinds are what local fault takes.
var faultKinds = []string{"ice", "fleet-error", "throttle", "server-error", "api-error", "latency", "drop-after-apply", "list", "clear"}

// localFault changes the running emulator's fault rules.
func localFault(ctx context.Context, c *cli, args []string) error {
	fs := flags(c, "karpless local fault", "[flags] <kind>")
	dir := dirFlag(fs)
	capacityType := fs.String("capacity-type", "", "ice, fleet-error: spot or on-demand (empty = any)")
	instanceType := fs.String("type", "", "ice, fleet-error: the instance type (empty = any)")
	zone := fs.String("zone", "", "ice, fleet-error: the zone (empty = any)")
	action := fs.String("action", "", "the API action (e.g. CreateFleet; empty = any)")
	code := fs.String("code", "", "fleet-error, api-error: the error code")
	status := fs.Int("status", 400, "api-error: the HTTP status")
	count := fs.Int("count", 0, "how many matches the rule serves (0 = until cleared)")
	latency := fs.Duration("latency", time.Second, "latency: the delay")
	output := fs.String("o", outputText, "list: output format, text, json or yaml")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badUsage(fs, "")
	}
	if err := checkOutput(fs, *output); err != nil {
		return err
	}
	if !slices.Contains(faultKinds, pos[0]) {
		return badUsage(fs, "unknown fault %q", pos[0])
	}
	st, err := readState(*dir)
	if err != nil {
		return err
	}
	a := emulator.Admin{URL: st.Endpoint}
	var f emulator.Fault
	switch pos[0] {
	case "list":
		list, err := a.Faults(ctx)
		if err != nil {
			return err
		}
		rules := faultList{Faults: []string{}}
		for _, f := range list {
			rules.Faults = append(rules.Faults, f.String())
		}
		return write(c.out, *output, rules, rules.WriteText)
	case "clear":
		if err := a.ClearFaults(ctx); err != nil {
			return err
		}
		c.printf("faults cleared\n")
		return nil
	case "ice":
		f = emulator.ICE(*capacityType, *instanceType, *zone)
	case "fleet-error":
		f = emulator.FleetError(*code, *capacityType, *instanceType, *zone)
	case "throttle":
		f = emulator.Throttle(*action, 0)
	case "server-error":
		f = emulator.ServerError(*action, 0)
	case "api-error":
		f = emulator.APIError(*action, *code, *status, 0)
	case "latency":
		f = emulator.Latency(*action, *latency)
	case "drop-after-apply":
		f = emulator.DropAfterApply(*action, 0)
	default:
		return badUsage(fs, "unknown fault %q", pos[0])
	}
	f = f.Times(*count)
	if err := a.Inject(ctx, f); err != nil {
		return err
	}
	c.printf("injected: %s\n", f)
	return nil
}

// absDir resolves the environment directory.
func absDir(dir string) (string, error) {
	if dir == "" {
		dir = DefaultLocalDir
	}
	return filepath.Abs(dir)
}
