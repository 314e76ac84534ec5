package stack

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"
)

// Alarms on invocations that never ran (docs/operations.md, "Alarms"):
//
//   - Throttles (AWS/Lambda) of every function but the bootstrap: Lambda
//     refused to start it for lack of concurrency. A scheduled invocation
//     is asynchronous; Lambda retries it from its queue until the target's
//     maximum event age (60 s), then drops it.
//   - AsyncEventsDropped (AWS/Lambda) of each scheduled function: a
//     scheduled (or, for the provisioner, the watcher's) invocation
//     dropped without running: throttled past its 60 s, or failed with no
//     retry left (the targets retry nothing: the next minute's tick takes
//     over).
//   - FailedInvocations (AWS/Events) of each schedule rule: EventBridge
//     could not hand the event to Lambda at all (a missing permission, a
//     deleted function).
//
// One of these in a while costs a minute of reaction; the alarms fire on
// a run: at least one in 3 of 5 consecutive minutes. A minute without
// data (nothing happened) is not breaching. Each alarm is one standard
// resolution metric, $0.10 a month (docs/deploy.md).
const (
	alarmPeriod            = time.Minute
	alarmEvaluationPeriods = 5
	alarmDatapoints        = 3
)

// defineAlarms adds the alarms above, notifying AlarmTopicARN when set.
func (s *Stack) defineAlarms() {
	var action awscloudwatch.IAlarmAction
	if s.Props.AlarmTopicARN != "" {
		topic := awssns.Topic_FromTopicArn(s.Stack, jsii.String("AlarmTopic"), jsii.String(s.Props.AlarmTopicARN))
		action = awscloudwatchactions.NewSnsAction(topic)
	}
	alarm := func(id, suffix, what string, metric awscloudwatch.Metric) {
		a := awscloudwatch.NewAlarm(s.Stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(fmt.Sprintf("karpless-%s-%s", s.cluster(), suffix)),
			AlarmDescription:   jsii.String(fmt.Sprintf("Karpless %s: %s. What to do: docs/operations.md, Alarms.", s.cluster(), what)),
			Metric:             metric,
			Threshold:          jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			EvaluationPeriods:  jsii.Number(alarmEvaluationPeriods),
			DatapointsToAlarm:  jsii.Number(alarmDatapoints),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if action != nil {
			a.AddAlarmAction(action)
		}
		s.Alarms[id] = a
	}
	metric := func(namespace, name, dimension string, value *string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(namespace),
			MetricName:    jsii.String(name),
			DimensionsMap: &map[string]*string{dimension: value},
			Statistic:     jsii.String("Sum"),
			Period:        duration(alarmPeriod),
		})
	}
	for _, name := range s.Props.Functions() {
		if name == Bootstrap {
			continue
		}
		fn := s.Functions[name].FunctionName()
		alarm(titleID(name)+"ThrottlesAlarm", name+"-throttled",
			"the "+name+" function is throttled (Lambda Throttles)",
			metric("AWS/Lambda", "Throttles", "FunctionName", fn))
		if _, scheduled := s.Schedules[name]; scheduled {
			alarm(titleID(name)+"DroppedAlarm", name+"-dropped",
				"invocations of the "+name+" function are dropped without running (Lambda AsyncEventsDropped)",
				metric("AWS/Lambda", "AsyncEventsDropped", "FunctionName", fn))
		}
	}
	for _, name := range s.Props.Functions() {
		rule, ok := s.Schedules[name]
		if !ok {
			continue
		}
		alarm(titleID(name)+"ScheduleFailedAlarm", name+"-schedule-failed",
			"the "+name+" schedule cannot invoke its function (EventBridge FailedInvocations)",
			metric("AWS/Events", "FailedInvocations", "RuleName", rule.RuleName()))
	}
}
