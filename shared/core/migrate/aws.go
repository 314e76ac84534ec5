package migrate

import (
	"fmt"
	"strings"
)

// ControllerPolicyNames are the customer-managed IAM policies Karpenter's
// getting-started CloudFormation template creates for its controller:
// six since v1.x split them (v1.14.1's template), and the single policy of
// v1.0's.
func ControllerPolicyNames(cluster string) []string {
	var out []string
	for _, p := range []string{"NodeLifecycle", "IAMIntegration", "EKSIntegration", "Interruption", "ZonalShift", "ResourceDiscovery", ""} {
		out = append(out, "KarpenterController"+p+"Policy-"+cluster)
	}
	return out
}

// NodeRoleEntry is what was found of one node role's EKS access entry.
type NodeRoleEntry struct {
	Role string
	// ARN is the role's ARN ("" if the role was not found).
	ARN string
	// Where says why the role is checked: "EC2NodeClass default",
	// "--node-role".
	Where string
	// Found: an access entry exists for the role; Type is its type.
	Found bool
	Type  string
	// Stack is the CloudFormation stack that created the entry
	// (aws:cloudformation:stack-name tag), if any.
	Stack string
	// InAWSAuth: the role is mapped in kube-system/aws-auth.
	InAWSAuth bool
	// AuthMode is the cluster's authenticationMode.
	AuthMode string
	// Err is why it could not be checked.
	Err error
}

// CheckAccessEntries judges each node role's access entry, which nodes
// need to join and stay in the cluster (unless aws-auth maps the role).
func CheckAccessEntries(entries []NodeRoleEntry) []Result {
	if len(entries) == 0 {
		return []Result{{Check: NameAccessEntry, Status: Warn, Subject: "node roles",
			Detail: "no node role to check: no EC2NodeClass names one.",
			Do:     []string{"Pass the role your nodes use: karpless migrate check --node-role <name>."}}}
	}
	var out []Result
	for _, e := range entries {
		r := Result{Check: NameAccessEntry, Subject: "node role " + e.Role}
		if e.Where != "" {
			r.Subject += " (" + e.Where + ")"
		}
		switch {
		case e.Err != nil:
			r.Status = Warn
			r.Detail = fmt.Sprintf("not checked: %v", e.Err)
		case e.Found && e.Type != "EC2_LINUX" && e.Type != "EC2_WINDOWS":
			r.Status = Fail
			r.Detail = fmt.Sprintf("has an access entry of type %s; nodes need EC2_LINUX (EC2_WINDOWS for Windows nodes), which maps them to system:nodes.", e.Type)
			r.Do = []string{fmt.Sprintf("Replace it: aws eks delete-access-entry --cluster-name <cluster> --principal-arn %s, then aws eks create-access-entry --cluster-name <cluster> --principal-arn %s --type EC2_LINUX (or deploy Karpless without skipNodeAccessEntry, which creates it).", e.ARN, e.ARN)}
		case e.Found:
			r.Status = OK
			r.Detail = fmt.Sprintf("has an %s access entry: deploy Karpless with -c skipNodeAccessEntry=true for this role (:skipAccessEntry in -c nodeRoles), or the stack's own entry fails to create.", e.Type)
			if e.Stack != "" {
				r.Detail += fmt.Sprintf("\nThe entry belongs to CloudFormation stack %s: deleting that stack deletes it, and every node of this role loses its access to the cluster. Keep the stack (a Karpless stack keeps node access entries on make destroy: DeletionPolicy Retain).", e.Stack)
			}
		case e.InAWSAuth && e.AuthMode != "API":
			r.Status = Warn
			r.Detail = "has no access entry; its nodes join through the aws-auth ConfigMap (authentication mode " + e.AuthMode + ")."
			r.Do = []string{"Deploy Karpless without skipNodeAccessEntry for this role: the stack creates an EC2_LINUX entry, and keeps it when you destroy the stack (remove it yourself once no node uses the role). Keep the aws-auth mapping until every node of the role has the entry."}
		default:
			r.Status = Warn
			r.Detail = "has no access entry"
			if e.AuthMode != "" {
				r.Detail += " (authentication mode " + e.AuthMode + ")"
			}
			r.Detail += ": nodes of this role cannot join unless another mapping lets them."
			r.Do = []string{"Deploy Karpless without skipNodeAccessEntry for this role: the stack creates the EC2_LINUX entry, and keeps it on make destroy."}
		}
		out = append(out, r)
	}
	return out
}

// Policy is a customer-managed IAM policy that was found.
type Policy struct {
	Name, ARN   string
	Attachments int
}

// CheckControllerPolicies judges what is left of Karpenter's controller
// policies.
func CheckControllerPolicies(cluster string, found []Policy, err error) Result {
	r := Result{Check: NameIAM, Subject: "KarpenterController*Policy-" + cluster}
	switch {
	case err != nil:
		r.Status = Warn
		r.Detail = fmt.Sprintf("not checked: %v", err)
	case len(found) == 0:
		r.Status = OK
		r.Detail = "none of Karpenter's controller policies is left."
	default:
		var parts []string
		attached := 0
		for _, p := range found {
			parts = append(parts, fmt.Sprintf("%s (attached %d)", p.Name, p.Attachments))
			attached += p.Attachments
		}
		r.Status = Warn
		r.Detail = fmt.Sprintf("%s left: %s. Karpless does not use them (each function has its own role).", plural(len(found), "policy"), strings.Join(parts, ", "))
		r.Do = []string{"Keep them, with Karpenter's controller role, until Karpless is verified: a rollback needs them.",
			"Then remove them: detach them from Karpenter's controller role (aws iam list-entities-for-policy --policy-arn <arn>), delete the role's Pod Identity association or IRSA trust, and delete the policies. If Karpenter's getting-started CloudFormation stack created them and also the node role you still use, remove them from the stack's template rather than deleting the stack."}
		if attached == 0 {
			r.Do[0] = "They are attached to nothing: nothing runs with them."
		}
	}
	return r
}

// Queue is what was found of Karpenter's interruption queue.
type Queue struct {
	Name string
	// Exists: the queue exists; ARN is its ARN.
	Exists bool
	ARN    string
	// Rules are the EventBridge rules that target it.
	Rules []string
	// Messages is ApproximateNumberOfMessages (-1 unknown).
	Messages int
	// ReadBy is Karpenter's Deployment that reads it (INTERRUPTION_QUEUE),
	// "" if none.
	ReadBy string
	Err    error
}

// CheckQueue judges Karpenter's interruption queue and the rules that
// still feed it.
func CheckQueue(q Queue) Result {
	r := Result{Check: NameQueue, Subject: "SQS queue " + q.Name}
	switch {
	case q.Err != nil:
		r.Status = Warn
		r.Detail = fmt.Sprintf("not checked: %v", q.Err)
	case !q.Exists:
		r.Status = OK
		r.Detail = "no such queue: Karpenter's interruption queue is gone (or was never made)."
	case len(q.Rules) == 0:
		r.Status = Warn
		r.Detail = "exists, and no EventBridge rule sends to it any more: it receives nothing."
		r.Do = []string{fmt.Sprintf("Delete it once Karpless is verified: aws sqs delete-queue --queue-url $(aws sqs get-queue-url --queue-name %s --query QueueUrl --output text).", q.Name)}
	default:
		r.Status = Warn
		r.Detail = fmt.Sprintf("still receives EC2 and AWS Health events from %s (%s). EventBridge gives each matching rule its own copy, so every spot interruption, rebalance, state change and scheduled change goes both here and to Karpless's queue.",
			plural(len(q.Rules), "EventBridge rule"), strings.Join(q.Rules, ", "))
		if q.ReadBy != "" {
			r.Detail += fmt.Sprintf(" %s reads it (INTERRUPTION_QUEUE): while it runs beside Karpless both act on the same event, each tainting, draining and replacing the same node.", q.ReadBy)
		} else {
			r.Detail += " No Karpenter Deployment reads it now; its messages expire (5 minutes in Karpenter's template)."
		}
		if q.Messages > 0 {
			r.Detail += fmt.Sprintf(" %s waiting.", plural(q.Messages, "message"))
		}
		r.Do = []string{"Keep the queue and its rules until Karpless is verified: a rollback to Karpenter needs them.",
			"Then delete them: for each rule, aws events remove-targets --rule <rule> --ids <target id> and aws events delete-rule --name <rule>, then aws sqs delete-queue. If Karpenter's getting-started stack made them and also the node role you use, remove them from that stack's template instead of deleting the stack."}
	}
	return r
}
