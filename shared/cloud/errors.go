package cloud

import (
	"errors"

	"github.com/karpless/karpless/shared/aws/instance"
	"github.com/karpless/karpless/shared/function/record"
)

// ErrorsMetric is Karpenter's karpenter_cloudprovider_errors_total (core
// pkg/cloudprovider/metrics/cloudprovider.go): the failed calls of its
// CloudProvider, labelled controller, method, provider and error. Karpless
// counts the failed EC2 calls of the work each of those methods does:
//   - Create: a launch (cloud.Launch): the instances of the claim
//     listed, launch templates ensured, CreateFleet;
//   - Delete: an instance terminated (TerminateInstances, and the
//     DescribeInstances that finds and confirms it);
//   - Get: one instance read.
//
// Karpenter also counts the NodeClaimNotFoundError its Delete returns once
// an instance is gone, which ends every termination; Karpless, which
// confirms that by reading the instance, counts only what failed.
const ErrorsMetric = "karpenter_cloudprovider_errors_total"

// The method label values: Karpenter's CloudProvider methods.
const (
	MethodCreate = "Create"
	MethodDelete = "Delete"
	MethodGet    = "Get"
)

// The controller label values: the Karpenter controllers that make the
// calls Karpless makes there.
const (
	// ControllerLifecycle launches NodeClaims and finalizes those that
	// never registered (Karpless's provisioning passes).
	ControllerLifecycle = "nodeclaim.lifecycle"
	// ControllerNodeTermination terminates the instance of a drained node
	// (Karpless's termination, in the disruption and interruption functions).
	ControllerNodeTermination = "node.termination"
	// ControllerInstanceGC terminates instances no NodeClaim accounts for.
	ControllerInstanceGC = "instance.garbagecollection"
	// ControllerNodeClaimGC reads the instance of a NodeClaim whose node
	// is not Ready, to delete the claim once it is gone.
	ControllerNodeClaimGC = "nodeclaim.garbagecollection"
)

// Provider is the provider label: the AWS provider's CloudProvider.Name.
const Provider = "aws"

// The error label values Karpenter gives its well-known errors; any other
// error is "".
const (
	InsufficientCapacityError = "InsufficientCapacityError"
	NodeClaimNotFoundError    = "NodeClaimNotFoundError"
	NodeClassNotReadyError    = "NodeClassNotReadyError"
)

// errNodeClassNotReady and errNoOffering are the launches that end before
// CreateFleet, as Karpenter's Create fails with NodeClassNotReadyError and
// InsufficientCapacityError.
var (
	errNodeClassNotReady = errors.New("EC2NodeClass not ready")
	errNoOffering        = errors.New("no offering available")
)

// Errors counts the failed cloud calls of one controller; the zero value
// (no Metrics) counts nothing.
type Errors struct {
	Metrics    *record.Metrics
	Controller string
}

// Count counts err, when not nil, as a failure of method, and returns it.
func (e Errors) Count(method string, err error) error {
	if err != nil {
		e.Metrics.Count(ErrorsMetric, 1, map[string]string{
			"controller": e.Controller, "method": method, "provider": Provider, "error": errorLabel(err),
		})
	}
	return err
}

// errorLabel is Karpenter's error label of err (GetErrorTypeLabelValue).
func errorLabel(err error) string {
	switch {
	case errors.Is(err, instance.ErrNoCapacity), errors.Is(err, errNoOffering):
		return InsufficientCapacityError
	case errors.Is(err, instance.ErrNotFound):
		return NodeClaimNotFoundError
	case errors.Is(err, errNodeClassNotReady):
		return NodeClassNotReadyError
	}
	return ""
}
