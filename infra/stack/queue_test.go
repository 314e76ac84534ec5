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
	check(t, "5 event-pattern rules", func() {
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
			"MessageRetentionPeriod": 300,
			"VisibilityTimeout":      70,
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
	// The visibility timeout must cover the function timeout (Lambda
	// refuses the mapping otherwise) and leave several deliveries inside
	// the retention.
	if queueVisibility < interruptionTimeout+interruptionBatchingWindow || 4*queueVisibility > queueRetention {
		t.Errorf("visibility %v: want >= %v and 4 deliveries within %v", queueVisibility, interruptionTimeout+interruptionBatchingWindow, queueRetention)
	}
}

func TestQueuePolicy(t *testing.T) {
	queue := logicalID(st, st.Queue)
	queueARN := getAtt(queue, "Arn")
	rules := []interface{}{}
	for _, id := range []string{"SpotInterruptionRule", "RebalanceRule", "InstanceStateChangeRule", "CapacityReservationInterruptionRule", "ScheduledChangeRule"} {
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
