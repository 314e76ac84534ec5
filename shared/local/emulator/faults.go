package emulator

import (
	"fmt"
	"strings"
	"time"
)

// FaultKind says how a fault shows.
type FaultKind int

const (
	// FaultAPIError answers the whole request with an error code.
	FaultAPIError FaultKind = iota
	// FaultThrottle answers with the service's throttling error
	// (RequestLimitExceeded, HTTP 503, for EC2; ThrottlingException, 400,
	// elsewhere), which the SDK's standard retryer retries with backoff.
	FaultThrottle
	// FaultFleetError fails matching CreateFleet overrides: the error is an
	// item of errorSet in an HTTP 200 answer, and other overrides may still
	// launch (partial fulfilment).
	FaultFleetError
	// FaultLatency delays the answer (real time).
	FaultLatency
	// FaultDropAfterApply applies the request, then closes the connection
	// without an answer: the caller cannot know whether it happened.
	FaultDropAfterApply
)

func (k FaultKind) String() string {
	switch k {
	case FaultAPIError:
		return "api-error"
	case FaultThrottle:
		return "throttle"
	case FaultFleetError:
		return "fleet-error"
	case FaultLatency:
		return "latency"
	case FaultDropAfterApply:
		return "drop-after-apply"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is a rule: matching calls fail the way Kind says. Empty match
// fields match anything.
type Fault struct {
	Kind FaultKind
	// Service (ec2, sqs, ssm, eks, iam, sts) and Action (CreateFleet) select
	// the calls.
	Service string
	Action  string
	// InstanceType, Zone and CapacityType (spot, on-demand) select
	// CreateFleet overrides, for FaultFleetError.
	InstanceType string
	Zone         string
	CapacityType string
	// Code and Message of the error; Status its HTTP status (default 503
	// for RequestLimitExceeded and ServiceUnavailable, 500 for
	// InternalError, 400 otherwise).
	Code    string
	Message string
	Status  int
	// Latency for FaultLatency.
	Latency time.Duration
	// Count is how many matches the rule serves before it disappears; 0
	// means until removed.
	Count int
}

// Times returns the fault limited to n matches.
func (f Fault) Times(n int) Fault { f.Count = n; return f }

func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(f.Kind.String())
	for _, kv := range [][2]string{{"service", f.Service}, {"action", f.Action}, {"type", f.InstanceType}, {"zone", f.Zone}, {"capacity", f.CapacityType}, {"code", f.Code}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if f.Latency > 0 {
		fmt.Fprintf(&b, " latency=%s", f.Latency)
	}
	if f.Count > 0 {
		fmt.Fprintf(&b, " count=%d", f.Count)
	}
	return b.String()
}

// ICE makes CreateFleet report InsufficientInstanceCapacity for the
// overrides of instanceType in zone with capacityType ("" = any), e.g.
// ICE("spot", "m5.large", "us-west-2a").
func ICE(capacityType, instanceType, zone string) Fault {
	return FleetError("InsufficientInstanceCapacity", capacityType, instanceType, zone)
}

// FleetError makes CreateFleet report code for matching overrides
// (UnfulfillableCapacity, MaxSpotInstanceCountExceeded, VcpuLimitExceeded,
// InsufficientFreeAddressesInSubnet, ...).
func FleetError(code, capacityType, instanceType, zone string) Fault {
	return Fault{Kind: FaultFleetError, Action: "CreateFleet", Code: code, CapacityType: capacityType, InstanceType: instanceType, Zone: zone}
}

// Throttle throttles the next n calls of action (0 = until removed).
func Throttle(action string, n int) Fault {
	return Fault{Kind: FaultThrottle, Action: action, Count: n}
}

// ServerError answers the next n calls of action with HTTP 500 InternalError.
func ServerError(action string, n int) Fault {
	return Fault{Kind: FaultAPIError, Action: action, Code: "InternalError", Status: 500, Count: n}
}

// APIError answers the next n calls of action with code and status.
func APIError(action, code string, status, n int) Fault {
	return Fault{Kind: FaultAPIError, Action: action, Code: code, Status: status, Count: n}
}

// Latency delays every call of action ("" = all) by d of real time.
func Latency(action string, d time.Duration) Fault {
	return Fault{Kind: FaultLatency, Action: action, Latency: d}
}

// DropAfterApply applies the next n calls of action and then drops their
// connections without an answer.
func DropAfterApply(action string, n int) Fault {
	return Fault{Kind: FaultDropAfterApply, Action: action, Count: n}
}

// FaultID names an injected fault.
type FaultID int

type faultState struct {
	Fault
	id        FaultID
	remaining int // <0: unlimited
}

// Inject adds a fault rule and returns its id.
func (e *Emulator) Inject(f Fault) FaultID {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq["fault"]++
	id := FaultID(e.seq["fault"])
	rem := f.Count
	if rem <= 0 {
		rem = -1
	}
	e.faults = append(e.faults, &faultState{Fault: f, id: id, remaining: rem})
	e.log.Info("fault injected", "fault", f.String(), "id", int(id))
	return id
}

// RemoveFault removes one rule.
func (e *Emulator) RemoveFault(id FaultID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, f := range e.faults {
		if f.id == id {
			e.faults = append(e.faults[:i], e.faults[i+1:]...)
			return
		}
	}
}

// ClearFaults removes every rule.
func (e *Emulator) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults = nil
}

// Faults lists the active rules.
func (e *Emulator) Faults() []Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Fault, 0, len(e.faults))
	for _, f := range e.faults {
		g := f.Fault
		if f.remaining > 0 {
			g.Count = f.remaining
		}
		out = append(out, g)
	}
	return out
}

// consume uses one match of f; callers hold e.mu.
func (e *Emulator) consume(f *faultState) {
	if f.remaining < 0 {
		return
	}
	f.remaining--
	if f.remaining == 0 {
		for i, g := range e.faults {
			if g == f {
				e.faults = append(e.faults[:i], e.faults[i+1:]...)
				break
			}
		}
	}
}

// requestFaults are what applies to a whole call.
type requestFaults struct {
	latency time.Duration
	err     *apiError
	drop    bool
}

// matchRequest evaluates request-level rules for a call; callers hold e.mu.
func (e *Emulator) matchRequest(service, action string) requestFaults {
	var out requestFaults
	for _, f := range append([]*faultState(nil), e.faults...) {
		if (f.Service != "" && f.Service != service) || (f.Action != "" && f.Action != action) {
			continue
		}
		switch f.Kind {
		case FaultLatency:
			out.latency += f.Latency
			e.consume(f)
		case FaultDropAfterApply:
			if !out.drop {
				out.drop = true
				e.consume(f)
			}
		case FaultThrottle:
			if out.err == nil {
				out.err = throttleError(service)
				e.consume(f)
			}
		case FaultAPIError:
			if out.err == nil {
				msg := f.Message
				if msg == "" {
					msg = "Injected fault: " + f.Code
				}
				out.err = &apiError{Code: f.Code, Message: msg, Status: f.Status}
				if out.err.Status == 0 {
					out.err.Status = defaultStatus(f.Code)
				}
				e.consume(f)
			}
		}
	}
	return out
}

// matchFleet returns the first fleet-error rule for an override; callers hold e.mu.
func (e *Emulator) matchFleet(capacityType, instanceType, zone string) (code, message string, ok bool) {
	for _, f := range e.faults {
		if f.Kind != FaultFleetError {
			continue
		}
		if (f.CapacityType != "" && f.CapacityType != capacityType) || (f.InstanceType != "" && f.InstanceType != instanceType) || (f.Zone != "" && f.Zone != zone) {
			continue
		}
		msg := f.Message
		if msg == "" {
			msg = fleetErrorMessage(f.Code, capacityType, instanceType, zone)
		}
		e.consume(f)
		return f.Code, msg, true
	}
	return "", "", false
}

func fleetErrorMessage(code, capacityType, instanceType, zone string) string {
	switch code {
	case "InsufficientInstanceCapacity":
		if capacityType == "spot" {
			return fmt.Sprintf("There is no Spot capacity available that matches your request (%s in %s).", instanceType, zone)
		}
		return fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", instanceType, zone)
	case "UnfulfillableCapacity":
		return fmt.Sprintf("Unable to fulfill capacity due to your request configuration (%s in %s).", instanceType, zone)
	case "MaxSpotInstanceCountExceeded":
		return "Max spot instance count exceeded"
	case "VcpuLimitExceeded":
		return "You have requested more vCPU capacity than your current vCPU limit allows."
	}
	return "Injected fault: " + code
}

func throttleError(service string) *apiError {
	if service == "ec2" {
		return &apiError{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Status: 503}
	}
	if service == "sqs" {
		return &apiError{Code: "ThrottlingException", Message: "Rate exceeded", Status: 400, QueryCode: "ThrottlingException;Sender"}
	}
	if service == "lambda" {
		return &apiError{Code: "TooManyRequestsException", Message: "Rate Exceeded.", Status: 429}
	}
	if service == "cloudformation" {
		return &apiError{Code: "Throttling", Message: "Rate exceeded", Status: 400}
	}
	return &apiError{Code: "ThrottlingException", Message: "Rate exceeded", Status: 400}
}

func defaultStatus(code string) int {
	switch code {
	case "RequestLimitExceeded", "ServiceUnavailable", "Unavailable":
		return 503
	case "InternalError", "InternalFailure", "ServiceFailure":
		return 500
	}
	return 400
}

// apiError is an error answer of any protocol.
type apiError struct {
	Code    string
	Message string
	Status  int
	// Type is the JSON __type (defaults to Code); QueryCode is SQS's
	// X-Amzn-Query-Error header value.
	Type      string
	QueryCode string
}

func (a *apiError) Error() string { return a.Code + ": " + a.Message }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...), Status: status}
}
