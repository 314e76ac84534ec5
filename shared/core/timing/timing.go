// Package timing holds every TTL, interval, patience and timeout the
// functions use, each with its reason, so they are read and tuned in one place.
package timing

import "time"

// Settings the environment may override (shared/function/config), as
// Karpenter ships them where it has an equivalent.
const (
	// DefaultBatchIdle closes a batch of pending pods after a second
	// without another (Karpenter's BATCH_IDLE_DURATION).
	DefaultBatchIdle = time.Second
	// DefaultBatchMax closes a batch after ten seconds in all
	// (Karpenter's BATCH_MAX_DURATION).
	DefaultBatchMax = 10 * time.Second
	// DefaultWatchWindow is how long a tick that found work keeps
	// watching and acting before the next tick, a minute later, takes over.
	DefaultWatchWindow = 50 * time.Second
	// DefaultDeadlineMargin is kept free before the Lambda deadline for
	// the lease release and the flush of Events and metrics.
	DefaultDeadlineMargin = 5 * time.Second
	// DefaultLeaseDuration is how long a killed holder keeps a lease: half
	// a tick, so the next tick finds it free.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultRegistrationTTL retires a claim whose node has not registered
	// by then (Karpenter's 15 minutes).
	DefaultRegistrationTTL = 15 * time.Minute
	// DefaultUnavailableOfferingsTTL is how long an offering that failed
	// for lack of capacity is left out (Karpenter's 3 minutes).
	DefaultUnavailableOfferingsTTL = 3 * time.Minute
)

// The provisioning lease and its watch window.
const (
	// leaseRenewFraction: a holder renews its lease after a third of its
	// duration, so two renewals can fail or run slow before it lapses.
	leaseRenewFraction = 3
	// leaseHandoverSlack is what an interruption batch waits beyond the
	// provisioner's renewal interval: the renewal that notices the
	// hand-over request, then its release, each one API call.
	leaseHandoverSlack = 2 * time.Second
	// LeaseAcquirePoll is how often a waiting invocation asks again.
	LeaseAcquirePoll = 200 * time.Millisecond
	// LifecycleEvery is how often the watch window advances in-flight
	// claims (registration and initialization) between pod batches.
	LifecycleEvery = 2 * time.Second
	// FlushTimeout bounds the writes made on the way out (Events, the
	// lease release, the capacity marks), which run after the invocation's
	// context may end.
	FlushTimeout = 3 * time.Second
)

// LeaseRenewEvery is how often a holder of a lease of duration d renews
// it (and a watching tick looks for a hand-over request): a third of d.
// It is derived, never set on its own: a renewal interval longer than the
// duration (LEASE_DURATION=5s renewed every 10 s) would let a long pass
// act after its lease lapsed and another invocation took it. A d of zero
// or less is read as DefaultLeaseDuration.
func LeaseRenewEvery(d time.Duration) time.Duration {
	if d <= 0 {
		d = DefaultLeaseDuration
	}
	return d / leaseRenewFraction
}

// LeaseWait is how long an interruption batch waits for the provisioning
// lease of duration d: the provisioner notices the hand-over request at
// its next renewal (LeaseRenewEvery) and releases, so a batch usually
// gets the lease sooner.
func LeaseWait(d time.Duration) time.Duration { return LeaseRenewEvery(d) + leaseHandoverSlack }

// EC2's eventual consistency: how long a missing answer is waited out.
const (
	// NotFoundPatience is how long EC2 must go on answering NotFound for a
	// NodeClaim's instance before the instance is taken as gone: far
	// longer than EC2 takes to list a new instance (seconds; the
	// emulator's worst case is 8 s), far shorter than it keeps a
	// terminated one listed (an hour).
	NotFoundPatience = time.Minute
	// TokenPatience is how long a launch waits for the instance of an
	// applied call to be listed before taking its token as spent; the
	// instance is tagged with its NodeClaim from creation, so it is found
	// by that tag.
	TokenPatience = time.Minute
	// LaunchTemplateWait is the pause before a launch that met a launch
	// template EC2 has just created but does not list yet tries again:
	// EC2 lists it within seconds (the emulator's worst case is 3 s).
	LaunchTemplateWait = time.Second
	// InstanceGrace is Karpenter's: instances younger than this are never
	// collected as leaked.
	InstanceGrace = 30 * time.Second
	// TemplateMinAge keeps launch templates created recently; an older one
	// that is still wanted is recreated by the next launch.
	TemplateMinAge = time.Hour
)

// What is read from AWS and EKS, and how long it is trusted.
const (
	// PricingMaxAge is how long a book of spot prices is used before EC2
	// is asked again.
	PricingMaxAge = 10 * time.Minute
	// CatalogMaxAge is how long the region's instance types and on-demand
	// prices are used before they are read again: they change when AWS
	// releases a type or reprices, and the reference provider refreshes
	// on-demand prices every 12 hours. A read that failed is tried again
	// sooner (CatalogRetryMin).
	CatalogMaxAge = 12 * time.Hour
	// CatalogRetryMin is how soon a reading of the region's catalog that
	// failed is tried again (the next tick); each failure in a row doubles
	// it, up to PricingMaxAge, so a throttle costs a minute and a denied
	// call a few calls an hour.
	CatalogRetryMin = time.Minute
	// CatalogPagesPerTick is how many pages of each part (instance types,
	// on-demand prices) one tick reads: about 15 pages each make a full
	// reading, so it takes three ticks, none of which spends more than a
	// second or two on it; the last complete reading serves meanwhile.
	CatalogPagesPerTick = 5
	// CatalogReadTimeout bounds one reading of the region's instance types
	// and on-demand prices (about 30 calls, a few seconds on Lambda), so
	// that a slow or throttled API cannot eat a tick's minute.
	CatalogReadTimeout = 15 * time.Second
	// NodeClassRefresh is how often a class's status is re-resolved:
	// Karpenter re-reads subnets and security groups every minute and AMIs
	// within five.
	NodeClassRefresh = time.Minute
	// SelectorCacheTTL is how long a warm container answers a selector
	// query (the Describe calls of an EC2NodeClass's subnet, security
	// group or AMI terms) from what it found before: Karpenter's
	// DefaultTTL, the most a resolved status may lag AWS by, beyond the
	// refresh interval. A changed query (new terms, a newly published AMI
	// id) is never answered from another query's result.
	SelectorCacheTTL = time.Minute
	// ClusterInfoTTL is how long facts fetched from EKS or the API server
	// are reused; the Kubernetes version changes on an upgrade, which the
	// AMI aliases must follow (Karpenter polls it every 5 minutes too).
	ClusterInfoTTL = 5 * time.Minute
	// TokenLifetime is how long EKS accepts a token after its signing time.
	TokenLifetime = 15 * time.Minute
	// TokenRefreshBefore is how long before expiry a cached token is
	// replaced, which leaves room for clock skew and long requests.
	TokenRefreshBefore = 5 * time.Minute
)

// Work one invocation takes on: a backlog is worked through a bounded
// share per pass, the rest left to the next pass (the watch window's, or
// the next tick's), never in one pass that outgrows the function's memory
// or deadline.
const (
	// MaxPodsPerPass bounds the pending pods one provisioning pass
	// simulates, the oldest first. A simulation's memory and time grow with
	// its pods. A tick that simulates 5,000 of 15,000 pending pods on a
	// 5,000-node cluster used 8-10 s of CPU and at most 303 MiB of heap
	// under the deployed GOMEMLIMIT (shared/local/scale BenchmarkScale):
	// about 34 s on Lambda's 0.3 vCPU, inside 512 MiB and the tick's
	// minute. A burst larger than that is rare enough that taking it in a
	// few passes costs little.
	MaxPodsPerPass = 5000
	// MaxNodeClaimsPerPass bounds the NodeClaims one provisioning pass
	// creates and launches; the pods the simulation put on the others stay
	// pending for the next pass, which finds these in flight. Each claim
	// costs about four requests to the API server (create, labels, status,
	// its Event) and a CreateFleet, one of EC2's mutating calls, whose
	// token bucket holds a few hundred and refills at a few a second: 100
	// claims a pass leave room for the next pass and for the other
	// functions' launches.
	MaxNodeClaimsPerPass = 100
	// StatusWriteBudget bounds the time a disruption pass spends writing
	// the NodeClaims' disruption conditions, pod event times and
	// fingerprints. A cluster whose pods all moved (a fresh install on
	// thousands of nodes, a rollout) changes every claim at once; two
	// requests a claim at the client's 200 a second (eksauth.DefaultQPS)
	// write about 2,000 claims in 20 s (500 at Lambda's share of a CPU),
	// and the pass still has time to decide. It decides on the changes
	// left too (in memory); the next pass writes them.
	StatusWriteBudget = 20 * time.Second
)

// Disruption.
const (
	// ConsolidatedTTL is how long a "nothing to consolidate" result holds
	// while the cluster does not change: Karpenter's five minutes, after
	// which prices and capacity, which leave no trace in the cluster, may
	// have moved.
	ConsolidatedTTL = 5 * time.Minute
	// CommandValidationDelay is Karpenter's wait before a consolidation is
	// checked again and carried out.
	CommandValidationDelay = 15 * time.Second
	// InstanceTypeNotFoundDelay is the age after which a claim whose
	// instance type is no longer offered counts as drifted.
	InstanceTypeNotFoundDelay = time.Hour
	// ReplacementTimeout abandons a command whose replacements are not all
	// initialized by then.
	ReplacementTimeout = 10 * time.Minute
	// GCInterval is the least time between garbage collections.
	GCInterval = 2 * time.Minute
	// DisruptionPollInterval is the wait between passes while commands are
	// in flight.
	DisruptionPollInterval = 5 * time.Second
	// TaintSettle is how long the disrupted taint must have been on a node
	// before a read that finds it drained may end in TerminateInstances:
	// kube-scheduler binds from its cache, so a pod it placed just before
	// it saw the taint can still appear for a moment after.
	TaintSettle = 5 * time.Second
	// InterruptionRetryAfter is how soon a message whose action failed is
	// received again: the queue's visibility timeout is six times the
	// function's (as AWS advises for event sources), far too long for a
	// two-minute spot warning, so a failed message is made visible early.
	InterruptionRetryAfter = 10 * time.Second
)

// The bootstrap custom resource.
const (
	// BootstrapMargin is kept before the Lambda deadline to send the
	// answer to CloudFormation (one HTTPS PUT to S3).
	BootstrapMargin = 20 * time.Second
	// BootstrapRetryWindow is how long 401/403 and transient API errors
	// are retried from the start of a request: a new access entry and its
	// access policy take a few seconds to reach the API server.
	BootstrapRetryWindow = 60 * time.Second
	// BootstrapDeleteTimeout bounds a Delete, so that a cluster which is
	// gone or unreachable cannot hold `cdk destroy` for CloudFormation's
	// whole timeout.
	BootstrapDeleteTimeout = 2 * time.Minute
	// CustomResourceWait bounds how long a create of a default object
	// waits for its CRD to be served after it became Established.
	CustomResourceWait = 30 * time.Second
)

// Capacity Blocks, as EC2 ends them and Karpenter v1.14.1 reacts.
const (
	// CapacityBlockExpiring is how long before a Capacity Block's end its
	// offerings go unavailable and its NodeClaims are deleted: 40
	// minutes, when EC2 sends its expiration warning and 10 minutes before
	// it starts terminating the instances (Karpenter's
	// capacityReservationExpirationPeriod).
	CapacityBlockExpiring = 40 * time.Minute
)

// Node repair, as Karpenter v1.14.1's AWS provider tolerates unhealthy
// node conditions (its RepairPolicies) before replacing the node.
const (
	// RepairToleration is how long a node may stay not Ready, or report a
	// node monitoring agent condition other than accelerated hardware
	// False, before it is replaced: long enough for a kubelet restart or a
	// network blip to heal.
	RepairToleration = 30 * time.Minute
	// RepairAcceleratedHardwareToleration is the shorter wait for a failed
	// GPU or Neuron device (AcceleratedHardwareReady False), which does
	// not heal on its own.
	RepairAcceleratedHardwareToleration = 10 * time.Minute
)

// The watcher function (continuous responsiveness).
const (
	// WatcherWindow is how long one watcher invocation watches: a minute,
	// the schedule's period, and a second more, so the next invocation is
	// watching before this one stops (work seen by both starts the
	// provisioner once: the second invocation finds its lease held).
	WatcherWindow = 61 * time.Second
	// WatcherCheckEvery is how often the watcher decides whether to invoke:
	// small against the batch's one-second wait.
	WatcherCheckEvery = 50 * time.Millisecond
	// WatcherAwaitAcquire is how long an invocation may take to show as a
	// new lease holder before it is taken as lost and sent again: a cold
	// start (under a second) with room for a throttled retry.
	WatcherAwaitAcquire = 5 * time.Second
	// WatcherRecent: objects of a watcher's first list whose change is
	// this recent appeared between two invocations' windows and are work;
	// older ones were seen before.
	WatcherRecent = 10 * time.Second
)

// InstanceStatusThreshold is how long EC2 must report an instance or system
// status check failed before the instance is replaced, Karpenter v1.14.1's
// (its instance status provider's UnhealthyThreshold): a check that fails
// for less, as during a brief host hiccup, passes again by itself.
// Scheduled events have no threshold: the host is going.
const InstanceStatusThreshold = 120 * time.Second
