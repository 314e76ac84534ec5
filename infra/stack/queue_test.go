package stack

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestInterruptionRules(t *testing.T) {
	queueARN := getAtt(logicalID(st, st.Queue), "Arn")
	cases := []struct {
		id      string
		pattern string
	}{
		{"SpotInterruptionRule", `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`},
		{"RebalanceRule", `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`},
		{"InstanceStateChangeRule", `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`},
		{"CapacityReservationInterruptionRule", `{"source":["aws.ec2"],"detail-type":["EC2 Capacity Reservation Instance Interruption Warning"]}`},
		{"CapacityBlockExpirationRule", `{"source":["aws.ec2"],"detail-type":["Capacity Block Reservation Expiration Warning"]}`},
		{"ScheduledChangeRule", `{"source":["aws.health"],"detail-type":["AWS Health Event"],
			"detail":{"service":["EC2"],"eventTypeCategory":["scheduledChange"]}}`},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			pattern := mustJSON(t, c.pattern)
			check(t, c.id, func() {
				tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), &map[string]interface{}{
					"EventPattern": assertions.Match_ObjectEquals(&pattern),
					"State":        "ENABLED",
					"Targets": assertions.Match_ArrayEquals(&[]interface{}{
						map[string]interface{}{"Id": "InterruptionQueue", "Arn": queueARN},
					}),
				})
			})
		})
	}
	check(t, "6 event-pattern rules", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::Events::Rule"), &map[string]interface{}{
			"EventPattern": assertions.Match_AnyValue(),
		}, jsii.Number(len(cases)))
	})
}

func TestQueues(t *testing.T) {
	dlq := logicalID(st, st.DeadLetterQueue)
	check(t, "interruption queue", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), &map[string]interface{}{
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 3600,
			"VisibilityTimeout":      360,
			"RedrivePolicy": map[string]interface{}{
				"deadLetterTargetArn": getAtt(dlq, "Arn"),
				"maxReceiveCount":     5,
			},
		})
	})
	check(t, "dead-letter queue", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), &map[string]interface{}{
			"SqsManagedSseEnabled":   true,
			"MessageRetentionPeriod": 14 * 24 * 3600,
			"RedrivePolicy":          assertions.Match_Absent(),
		})
	})
}

// TestQueueSizing checks the interruption queue against Lambda's guidance
// for SQS event sources ("Configuring a queue to use with Lambda"), with
// the numbers read from the synthesized template, so that what deploys is
// what is checked. With retention 300 s, visibility 70 s and
// maxReceiveCount 5 a failing message expired at 300 s, before the receive
// at 5 x 70 = 350 s that would have moved it to the dead-letter queue.
func TestQueueSizing(t *testing.T) {
	queue := props(resources(doc)[logicalID(st, st.Queue)])
	dlq := props(resources(doc)[logicalID(st, st.DeadLetterQueue)])
	fn := props(resources(doc)[logicalID(st, st.Functions[Interruption])])
	redrive, _ := queue["RedrivePolicy"].(map[string]any)

	retention := number(t, "queue MessageRetentionPeriod", queue["MessageRetentionPeriod"])
	visibility := number(t, "queue VisibilityTimeout", queue["VisibilityTimeout"])
	receives := number(t, "queue RedrivePolicy.maxReceiveCount", redrive["maxReceiveCount"])
	timeout := number(t, "interruption function Timeout", fn["Timeout"])
	dlqRetention := number(t, "dead-letter queue MessageRetentionPeriod", dlq["MessageRetentionPeriod"])

	cases := []struct {
		name    string
		got     float64
		atLeast float64
	}{
		// Lambda: at least 5, so that a transient failure is retried
		// before the message is set aside.
		{"maxReceiveCount", receives, 5},
		// Lambda: at least six function timeouts, room to retry a batch
		// that was throttled while a previous one ran.
		{"visibility timeout (s) vs 6 x function timeout", visibility, 6 * timeout},
		// A message that fails every time is received at 0, V, ..., (n-1)V
		// after its first receive; the receive that finds it over
		// maxReceiveCount, and moves it, comes n x V after the first. One
		// more V is the margin for the wait before the first receive
		// (throttling, poller back-off). SQS counts retention from the
		// first enqueue, so the message must still be there then.
		{"retention (s) vs (maxReceiveCount + 1) x visibility", retention, (receives + 1) * visibility},
		// The dead-letter queue keeps the original enqueue time: its
		// retention must be longer than the source queue's, or a moved
		// message could expire at once.
		{"dead-letter retention (s) vs retention + 1", dlqRetention, retention + 1},
	}
	for _, c := range cases {
		if c.got < c.atLeast {
			t.Errorf("%s: %v, want at least %v", c.name, c.got, c.atLeast)
		}
	}
}

// number reads a numeric template value.
func number(t *testing.T, what string, v any) float64 {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	}
	t.Fatalf("%s: %s is not a number", what, jsonString(v))
	return 0
}

func TestQueuePolicy(t *testing.T) {
	queue := logicalID(st, st.Queue)
	queueARN := getAtt(queue, "Arn")
	rules := []interface{}{}
	for _, id := range []string{"SpotInterruptionRule", "RebalanceRule", "InstanceStateChangeRule", "CapacityReservationInterruptionRule", "CapacityBlockExpirationRule", "ScheduledChangeRule"} {
		rules = append(rules, getAtt(id, "Arn"))
	}
	check(t, "queue policy", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), &map[string]interface{}{
			"Queues": []interface{}{ref(queue)},
			"PolicyDocument": map[string]interface{}{
				"Version": "2012-10-17",
				"Statement": []interface{}{
					// enforceSSL
					map[string]interface{}{
						"Effect": "Deny", "Principal": map[string]interface{}{"AWS": "*"},
						"Action": "sqs:*", "Resource": queueARN,
						"Condition": map[string]interface{}{"Bool": map[string]interface{}{"aws:SecureTransport": "false"}},
					},
					// EventBridge, from the five rules, may send ...
					map[string]interface{}{
						"Sid": "AllowEventBridgeRules", "Effect": "Allow",
						"Principal": map[string]interface{}{"Service": "events.amazonaws.com"},
						"Action":    "sqs:SendMessage", "Resource": queueARN,
						"Condition": map[string]interface{}{"ArnEquals": map[string]interface{}{"aws:SourceArn": rules}},
					},
					// ... and nobody else.
					map[string]interface{}{
						"Sid": "DenySendExceptFromEventBridgeRules", "Effect": "Deny",
						"Principal": map[string]interface{}{"AWS": "*"},
						"Action":    "sqs:SendMessage", "Resource": queueARN,
						"Condition": map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:SourceArn": rules}},
					},
				},
			},
		})
	})
	// The dead-letter queue only enforces TLS; SQS itself moves messages.
	check(t, "dead-letter queue policy", func() {
		dlq := logicalID(st, st.DeadLetterQueue)
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), &map[string]interface{}{
			"Queues": []interface{}{ref(dlq)},
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": []interface{}{assertions.Match_ObjectLike(&map[string]interface{}{
					"Effect": "Deny", "Action": "sqs:*",
					"Condition": map[string]interface{}{"Bool": map[string]interface{}{"aws:SecureTransport": "false"}},
				})},
			}),
		})
	})
	// No queue grants anything to anyone else.
	for id, qp := range resourcesOfType(doc, "AWS::SQS::QueuePolicy") {
		for _, s := range asList(props(qp)["PolicyDocument"].(map[string]any)["Statement"]) {
			s := s.(map[string]any)
			if s["Effect"] == "Allow" && jsonString(s["Principal"]) != `{"Service":"events.amazonaws.com"}` {
				t.Errorf("%s: unexpected Allow statement %s", id, jsonString(s))
			}
		}
	}
}

func TestEventSourceMapping(t *testing.T) {
	role := st.Roles[Interruption]
	check(t, "event source mapping", func() {
		tmpl.HasResource(jsii.String("AWS::Lambda::EventSourceMapping"), &map[string]interface{}{
			"Properties": assertions.Match_ObjectLike(&map[string]interface{}{
				"EventSourceArn":                 getAtt(logicalID(st, st.Queue), "Arn"),
				"FunctionName":                   ref(logicalID(st, st.Functions[Interruption])),
				"BatchSize":                      10,
				"MaximumBatchingWindowInSeconds": 1,
				"FunctionResponseTypes":          []interface{}{"ReportBatchItemFailures"},
			}),
			// Created after the role can read the queue.
			"DependsOn": assertions.Match_ArrayWith(&[]interface{}{
				logicalID(st, role.Node().FindChild(jsii.String("DefaultPolicy"))), logicalID(st, role),
			}),
		})
	})
	check(t, "one mapping", func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(1)) })
	check(t, "interruption role reads only this queue", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), &map[string]interface{}{
			"Roles": []interface{}{ref(logicalID(st, role))},
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]interface{}{
				"Statement": assertions.Match_ArrayWith(&[]interface{}{map[string]interface{}{
					"Sid":      "AllowInterruptionQueueActions",
					"Effect":   "Allow",
					"Action":   []interface{}{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"},
					"Resource": getAtt(logicalID(st, st.Queue), "Arn"),
				}}),
			}),
		})
	})
}
