package stack

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/karpless/karpless/shared/function/record"
)

// The dashboard (docs/deploy.md, "CloudWatch dashboard"): the views
// Karpenter users keep in Grafana (capacity, pods, launches, disruption,
// interruption, cost) beside the functions' own health. Each view reads
// what the functions publish at the stack's metrics level:
//
//   - full: the metrics themselves, under Karpenter's names (Metrics
//     Insights queries for those with dimensions that multiply);
//   - minimal: a metric only if record.Level.Extracts publishes it even
//     there (the alarms' few); every other view is a Logs Insights query
//     over the JSON line each figure is written as at every level (record
//     Metrics.Flush), so the default level publishes no series for it.
//
// Two views are Logs Insights at both levels, because no metric carries
// them: the hourly prices of the NodeClaims created, and those of the
// nodes disruption retired and of their replacements. Karpless does not
// publish Karpenter's karpenter_nodepools_cost_total (docs/operations.md).
const (
	// metricsNamespace is the functions' EMF namespace (record.NewMetricsAt
	// in shared/ticks/provision, shared/ticks/disrupt and shared/app).
	metricsNamespace = "Karpless"
	// dashboardPeriod is every graph's period and every query's bin: fine
	// enough to see a tick's minute-scale work in the default 3 hours.
	dashboardPeriod = 5 * time.Minute
	// dashboardInterval is the time range the dashboard opens on. A Logs
	// Insights widget scans its log groups over this range at each load
	// and refresh, so it sets what each load costs (docs/deploy.md).
	dashboardInterval = 3 * time.Hour
)

// Karpenter's metrics the dashboard reads (docs/operations.md lists who
// writes each, and its dimensions).
const (
	poolUsageMetric        = "karpenter_nodepools_usage"
	poolLimitMetric        = "karpenter_nodepools_limit"
	queueDepthMetric       = "karpenter_scheduler_queue_depth"
	podStartupMetric       = "karpenter_pods_startup_duration_seconds"
	nodeClaimsCreated      = "karpenter_nodeclaims_created_total"
	launchFailuresMetric   = "karpenter_cloudprovider_instance_launch_failures_total"
	decisionsMetric        = "karpenter_voluntary_disruption_decisions_total"
	disruptedMetric        = "karpenter_nodeclaims_disrupted_total"
	interruptionMessages   = "karpenter_interruption_received_messages_total"
	createdNodeClaimLog    = "created nodeclaim"
	disruptionTickDoneLog  = "disruption tick done"
	executedCommandAction  = "executed"
	logsInsightsTitleLabel = " (Logs Insights)"
)

// dashboard builds the widgets of one metrics level.
type dashboard struct {
	s     *Stack
	level record.Level
}

// view is one of the functions' figures drawn per bin: from metrics when
// the level publishes every metric it reads, from the logs otherwise.
type view struct {
	title string
	// reads are the metrics the metric form reads; metrics draws them (nil:
	// no metric carries the figure, the view is always a query).
	reads   []string
	metrics func() []awscloudwatch.IMetric
	// groups are the functions whose log groups the query scans; query is
	// its lines (joined with "|").
	groups []string
	query  []string
	// aws, when set, is the view: AWS's own metrics, at every level.
	aws awscloudwatch.IWidget
}

// defineDashboard adds the dashboard karpless-<cluster>-<region>: dashboards
// are global to an account, so the region keeps two regions' stacks for
// clusters of the same name apart.
func (s *Stack) defineDashboard() {
	d := dashboard{s: s, level: record.Level(s.Props.MetricsLevel)}
	// A row wraps past the grid's 24 columns: the views go two a line.
	var figures []awscloudwatch.IWidget
	for _, v := range d.views() {
		figures = append(figures, d.widget(v))
	}
	rows := [][]awscloudwatch.IWidget{{d.header()}, figures, d.functions()}
	widgets := make([]*[]awscloudwatch.IWidget, len(rows))
	for i := range rows {
		widgets[i] = &rows[i]
	}
	s.Dashboard = awscloudwatch.NewDashboard(s.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   jsii.String(fmt.Sprintf("karpless-%s-%s", s.cluster(), *s.Stack.Region())),
		DefaultInterval: duration(dashboardInterval),
		Widgets:         &widgets,
	})
}

// publishes reports whether the level makes CloudWatch metrics of every
// one of names.
func (d dashboard) publishes(names []string) bool {
	for _, n := range names {
		if !d.level.Extracts(n) {
			return false
		}
	}
	return len(names) > 0
}

// widget draws v from metrics or from the logs.
func (d dashboard) widget(v view) awscloudwatch.IWidget {
	if v.aws != nil {
		return v.aws
	}
	if v.metrics != nil && d.publishes(v.reads) {
		return graph(v.title, 12, v.metrics()...)
	}
	var groups []*string
	for _, fn := range v.groups {
		if g, ok := d.s.LogGroups[fn]; ok {
			groups = append(groups, g.LogGroupName())
		}
	}
	return awscloudwatch.NewLogQueryWidget(&awscloudwatch.LogQueryWidgetProps{
		Title:         jsii.String(v.title + logsInsightsTitleLabel),
		LogGroupNames: &groups,
		QueryLines:    jsii.Strings(v.query...),
		// Each query groups by bin() and at most one field: one line per
		// value of that field.
		View:   awscloudwatch.LogQueryVisualizationType_LINE,
		Width:  jsii.Number(12),
		Height: jsii.Number(6),
	})
}

func (d dashboard) header() awscloudwatch.IWidget {
	var source string
	if d.level == record.Full {
		source = "Metrics level **full**: the views read the functions' metrics (namespace `" + metricsNamespace + "`, shared by every Karpless stack of this account and region). " +
			"The two price views are Logs Insights queries over this stack's log groups: each load or refresh scans them over the time range shown, billed per GB scanned."
	} else {
		source = "Metrics level **minimal** (the default): views marked *Logs Insights* query the JSON lines the functions write every figure as; " +
			"each load or refresh scans their log groups over the time range shown, billed per GB scanned. " +
			"The others read the few metrics published at this level, and AWS's own. Deploy with metricsLevel=full to draw every view from metrics."
	}
	return awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
		Markdown: jsii.String(fmt.Sprintf("## Karpless, EKS cluster %s\n%s Queries and alarms: docs/operations.md.", d.s.cluster(), source)),
		Width:    jsii.Number(24),
		Height:   jsii.Number(2),
	})
}

// metric is one of the functions' metrics.
func metric(name, statistic, label string, dims map[string]string) awscloudwatch.IMetric {
	m := &awscloudwatch.MetricProps{
		Namespace:  jsii.String(metricsNamespace),
		MetricName: jsii.String(name),
		Statistic:  jsii.String(statistic),
		Period:     duration(dashboardPeriod),
		Label:      jsii.String(label),
	}
	if len(dims) > 0 {
		dm := map[string]*string{}
		for k, v := range dims {
			dm[k] = jsii.String(v)
		}
		m.DimensionsMap = &dm
	}
	return awscloudwatch.NewMetric(m)
}

// insights is a Metrics Insights query: one series per group, labelled by
// its group's values.
func insights(format string, a ...any) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(fmt.Sprintf(format, a...)),
		Label:      jsii.String(""),
		Period:     duration(dashboardPeriod),
	})
}

func metrics(m ...awscloudwatch.IMetric) func() []awscloudwatch.IMetric {
	return func() []awscloudwatch.IMetric { return m }
}

func graph(title string, width float64, left ...awscloudwatch.IMetric) awscloudwatch.GraphWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title:  jsii.String(title),
		Left:   &left,
		Width:  jsii.Number(width),
		Height: jsii.Number(6),
	})
}

// bin is the stats clause's time grouping, the graphs' period.
func bin() string { return fmt.Sprintf("bin(%dm)", int(dashboardPeriod.Minutes())) }

// metricFilter selects the lines of one metric (record.Metrics.Flush
// writes its name under "metric").
func metricFilter(name string, and ...string) string {
	return strings.Join(append([]string{fmt.Sprintf("filter metric = %q", name)}, and...), " and ")
}

// controllers are the functions that create NodeClaims and launch:
// provisioning, and the replacements of disruption and interruption.
var controllers = []string{Provisioner, Disruption, Interruption}

// views are the functions' figures and the queue's, two a line.
func (d dashboard) views() []view {
	ns := metricsNamespace
	return []view{
		{
			title:   "Nodes per NodePool",
			reads:   []string{poolUsageMetric},
			metrics: metrics(insights("SELECT MAX(%s) FROM SCHEMA(%s, nodepool, resource_type) WHERE resource_type = 'nodes' GROUP BY nodepool", poolUsageMetric, ns)),
			groups:  []string{Disruption},
			query: []string{
				metricFilter(poolUsageMetric, `resource_type = "nodes"`),
				fmt.Sprintf("stats max(%s) as nodes by %s, nodepool", poolUsageMetric, bin()),
			},
		},
		{
			title: "CPU cores per NodePool, and its limit",
			reads: []string{poolUsageMetric, poolLimitMetric},
			metrics: metrics(
				insights("SELECT MAX(%s) FROM SCHEMA(%s, nodepool, resource_type) WHERE resource_type = 'cpu' GROUP BY nodepool", poolUsageMetric, ns),
				insights("SELECT MAX(%s) FROM SCHEMA(%s, nodepool, resource_type) WHERE resource_type = 'cpu' GROUP BY nodepool", poolLimitMetric, ns)),
			groups: []string{Disruption},
			query: []string{
				fmt.Sprintf(`filter metric in [%q, %q] and resource_type = "cpu"`, poolUsageMetric, poolLimitMetric),
				fmt.Sprintf(`fields concat(nodepool, " ", replace(metric, "karpenter_nodepools_", "")) as series, coalesce(%s, %s) as value`, poolUsageMetric, poolLimitMetric),
				fmt.Sprintf("stats max(value) as cores by %s, series", bin()),
			},
		},
		{
			// The queue depth: published at every level, for the
			// pods-waiting alarm (record.Alarmed).
			title:   "Pods waiting for capacity (provisioner pass)",
			reads:   []string{queueDepthMetric},
			metrics: metrics(metric(queueDepthMetric, "Maximum", "pods", map[string]string{"controller": "provisioner"})),
			groups:  []string{Provisioner},
			query: []string{
				metricFilter(queueDepthMetric),
				fmt.Sprintf("stats max(%s) as pods by %s", queueDepthMetric, bin()),
			},
		},
		{
			title:   "Pod startup: creation to Ready (s)",
			reads:   []string{podStartupMetric},
			metrics: metrics(metric(podStartupMetric, "p50", "p50", nil), metric(podStartupMetric, "p99", "p99", nil)),
			groups:  []string{Provisioner},
			// A pass with several pods writes its values as a list:
			// unnest takes a list or a number alike.
			query: []string{
				metricFilter(podStartupMetric),
				"fields jsonParse(@message) as line",
				fmt.Sprintf("unnest line.%s into seconds", podStartupMetric),
				fmt.Sprintf("stats pct(seconds, 50) as p50, pct(seconds, 99) as p99 by %s", bin()),
			},
		},
		{
			title:   "NodeClaims created per NodePool",
			reads:   []string{nodeClaimsCreated},
			metrics: metrics(insights("SELECT SUM(%s) FROM SCHEMA(%s, nodepool, reason) GROUP BY nodepool", nodeClaimsCreated, ns)),
			groups:  controllers,
			query: []string{
				metricFilter(nodeClaimsCreated),
				fmt.Sprintf("stats sum(%s) as nodeclaims by %s, nodepool", nodeClaimsCreated, bin()),
			},
		},
		{
			// Published at every level (record.Alarmed).
			title:   "Launch failures per reason",
			reads:   []string{launchFailuresMetric},
			metrics: metrics(insights("SELECT SUM(%s) FROM SCHEMA(%s, capacity_type, reason, zone, zone_id) GROUP BY reason", launchFailuresMetric, ns)),
			groups:  controllers,
			query: []string{
				metricFilter(launchFailuresMetric),
				fmt.Sprintf("stats sum(%s) as failures by %s, reason", launchFailuresMetric, bin()),
			},
		},
		{
			title:   "Disruption decisions by method (reason, consolidation type)",
			reads:   []string{decisionsMetric},
			metrics: metrics(insights("SELECT SUM(%s) FROM SCHEMA(%s, consolidation_type, decision, reason) GROUP BY reason, consolidation_type", decisionsMetric, ns)),
			groups:  []string{Disruption},
			query: []string{
				metricFilter(decisionsMetric),
				`fields concat(reason, " ", consolidation_type) as method`,
				fmt.Sprintf("stats sum(%s) as decisions by %s, method", decisionsMetric, bin()),
			},
		},
		{
			title:   "NodeClaims disrupted per reason (interruptions included)",
			reads:   []string{disruptedMetric},
			metrics: metrics(insights("SELECT SUM(%s) FROM SCHEMA(%s, capacity_type, nodepool, reason) GROUP BY reason", disruptedMetric, ns)),
			groups:  []string{Disruption, Interruption},
			query: []string{
				metricFilter(disruptedMetric),
				fmt.Sprintf("stats sum(%s) as nodeclaims by %s, reason", disruptedMetric, bin()),
			},
		},
		{
			title:   "Interruption messages per type",
			reads:   []string{interruptionMessages},
			metrics: metrics(insights("SELECT SUM(%s) FROM SCHEMA(%s, message_type) GROUP BY message_type", interruptionMessages, ns)),
			groups:  []string{Interruption},
			query: []string{
				metricFilter(interruptionMessages),
				fmt.Sprintf("stats sum(%s) as messages by %s, message_type", interruptionMessages, bin()),
			},
		},
		{aws: d.interruptionQueue()},
		{
			// No metric: the hourly price of each NodeClaim created (its
			// cheapest offering's, as logged), summed per bin and NodePool.
			title:  "$/hour of the NodeClaims created (cheapest offering)",
			groups: controllers,
			query: []string{
				fmt.Sprintf("filter msg = %q", createdNodeClaimLog),
				fmt.Sprintf("stats sum(price) as usd_per_hour by %s, nodepool", bin()),
			},
		},
		{
			// No metric: the hourly price of the nodes each disruption
			// command started took away, and of their replacements.
			title:  "$/hour disrupted: candidates' price and their replacements'",
			groups: []string{Disruption},
			query: []string{
				fmt.Sprintf("filter msg = %q", disruptionTickDoneLog),
				"fields jsonParse(@message) as line",
				"unnest line.summary.commands into command",
				fmt.Sprintf("filter command.action = %q", executedCommandAction),
				fmt.Sprintf("stats sum(command.priceBefore) as before_usd_per_hour, sum(command.priceAfter) as after_usd_per_hour by %s", bin()),
			},
		},
	}
}

// interruptionQueue is AWS's own SQS metrics: the oldest notice's wait (a
// spot warning gives two minutes) and the messages set aside.
func (d dashboard) interruptionQueue() awscloudwatch.IWidget {
	opts := func(label string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: duration(dashboardPeriod), Label: jsii.String(label)}
	}
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title:  jsii.String("Interruption queue: oldest message (s), dead-letter messages"),
		Left:   &[]awscloudwatch.IMetric{d.s.Queue.MetricApproximateAgeOfOldestMessage(opts("oldest message, s"))},
		Right:  &[]awscloudwatch.IMetric{d.s.DeadLetterQueue.MetricApproximateNumberOfMessagesVisible(opts("dead-letter messages"))},
		Width:  jsii.Number(12),
		Height: jsii.Number(6),
	})
}

// functions are each function's errors, duration and throttles (AWS/Lambda).
func (d dashboard) functions() []awscloudwatch.IWidget {
	var errs, durations, throttles []awscloudwatch.IMetric
	opts := func(name, statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Statistic: jsii.String(statistic), Period: duration(dashboardPeriod), Label: jsii.String(name)}
	}
	for _, name := range d.s.Props.Functions() {
		fn := d.s.Functions[name]
		errs = append(errs, fn.MetricErrors(opts(name, "Sum")))
		durations = append(durations, fn.MetricDuration(opts(name, "Maximum")))
		throttles = append(throttles, fn.MetricThrottles(opts(name, "Sum")))
	}
	failed := graph("Function errors", 8, errs...)
	longest := awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String("Function duration, longest (ms)"),
		Left:  &durations,
		// A tick near its timeout loses its last pass: raise its memory
		// (docs/deploy.md, Sizing).
		LeftAnnotations: &[]*awscloudwatch.HorizontalAnnotation{{
			Value: jsii.Number(float64(tickTimeout.Milliseconds())),
			Label: jsii.String("tick timeout"),
		}},
		Width:  jsii.Number(8),
		Height: jsii.Number(6),
	})
	return []awscloudwatch.IWidget{failed, longest, graph("Function throttles", 8, throttles...)}
}
