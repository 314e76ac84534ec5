// Package events turns the EventBridge events that reach Karpless's Lambda functions into plain Message values,
// says what Karpenter v1 does about each one, and builds wire-exact sample bodies for tests and the local emulator.
//
// The envelopes are aws-lambda-go's own (github.com/aws/aws-lambda-go/events): the interruption function
// receives an SQSEvent, reports failures with SQSEventResponse and SQSBatchItemFailure, and each record's
// Body is a CloudWatchEvent (alias EventBridgeEvent) that Parse reads. This package adds only the detail
// shapes. CloudFormation custom-resource requests arrive as github.com/aws/aws-lambda-go/cfn.Event and never
// go through Parse.
package events
