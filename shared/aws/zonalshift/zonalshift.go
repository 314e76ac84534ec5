// Package zonalshift is the ARC zonal shift edge: it reads the shifts ARC
// lists on the cluster (GetManagedResource) once per pass, for ENABLE_ZONAL_SHIFT.
package zonalshift

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/arczonalshift"
	arctypes "github.com/aws/aws-sdk-go-v2/service/arczonalshift/types"

	"github.com/karpless/karpless/shared/aws/awserr"
	"github.com/karpless/karpless/shared/core/zonalshift"
)

// API is the ARC zonal shift call this package makes.
type API interface {
	GetManagedResource(ctx context.Context, in *arczonalshift.GetManagedResourceInput, opts ...func(*arczonalshift.Options)) (*arczonalshift.GetManagedResourceOutput, error)
}

// ErrNotRegistered means ARC does not know the cluster: zonal shift is not
// enabled on it (EKS zonalShiftConfig), so no shift could ever be read.
// Karpenter refuses to start then; a tick fails with it, naming the fix.
var ErrNotRegistered = errors.New("the cluster is not registered with ARC zonal shift")

// Source is where a pass reads the zones shifted away from (a *Reader).
type Source interface {
	Read(ctx context.Context) (zonalshift.Zones, error)
}

// Read reads src; nil (the setting off) reads none.
func Read(ctx context.Context, src Source) (zonalshift.Zones, error) {
	if src == nil {
		return nil, nil
	}
	return src.Read(ctx)
}

// Reader reads the shifts of one cluster. A nil Reader reads none: the
// setting is off. One Reader serves one invocation: with MaxAge it answers
// again from its last read for that long (the disruption tick and the
// provisioning session it borrows read once per pass each), as Karpenter
// refreshes its view every 30 s.
type Reader struct {
	API API
	// ClusterARN is the EKS cluster's ARN, ARC's resource identifier.
	ClusterARN string
	Now        func() time.Time
	MaxAge     time.Duration
	// LastKnown, when set, are the zones found shifted the last time any
	// invocation could read them (the disruption function's state): what
	// a pass goes by when ARC does not answer (throttled, unreachable) and
	// this Reader has not read yet. Karpenter goes on with its last view
	// then; failing every pass would strand pending pods while ARC is
	// down, and forgetting the shifts would act in an impaired zone.
	LastKnown func(ctx context.Context) (zonalshift.Zones, error)
	Log       *slog.Logger

	mu     sync.Mutex
	shifts []zonalshift.Shift
	readAt time.Time
}

// DefaultMaxAge is how long an invocation's Reader reuses a read: the
// polling interval of Karpenter's zonal shift controller.
const DefaultMaxAge = 30 * time.Second

// Read returns the zones shifted away from now. A cluster ARC does not
// know, or a call IAM refuses, is an error (the setting cannot work:
// Karpenter does not start). When ARC does not answer, the last view
// stands in: this Reader's last read, else LastKnown; with neither, the
// error. A pass that cannot tell which zones are shifted must not act as
// if none were (it would terminate or tag instances in an impaired zone,
// or launch there).
func (r *Reader) Read(ctx context.Context) (zonalshift.Zones, error) {
	if r == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Now()
	// Expiry is judged now, not at the read: a reused read still ends a
	// shift on time.
	if !r.readAt.IsZero() && now.Sub(r.readAt) < r.MaxAge {
		return zonalshift.Active(r.shifts, now), nil
	}
	out, err := r.API.GetManagedResource(ctx, &arczonalshift.GetManagedResourceInput{ResourceIdentifier: aws.String(r.ClusterARN)})
	if err != nil {
		switch {
		case awserr.Code(err) == "ResourceNotFoundException":
			return nil, fmt.Errorf("reading zonal shifts of %s: %w (enable zonal shift on the EKS cluster, or deploy with enableZonalShift=false): %w", r.ClusterARN, ErrNotRegistered, err)
		case awserr.IsUnauthorized(err):
			return nil, fmt.Errorf("reading zonal shifts of %s: arc-zonal-shift:GetManagedResource is not allowed (the stack grants it with enableZonalShift=true): %w", r.ClusterARN, err)
		}
		err = fmt.Errorf("reading zonal shifts of %s: %w", r.ClusterARN, err)
		if !r.readAt.IsZero() {
			r.warn("ARC did not answer; going by the shifts read before", err, "read_at", r.readAt)
			return zonalshift.Active(r.shifts, now), nil
		}
		if r.LastKnown != nil {
			z, lerr := r.LastKnown(ctx)
			if lerr == nil {
				r.warn("ARC did not answer; going by the shifts last known", err, "zone_ids", z.Sorted())
				return z, nil
			}
			err = errors.Join(err, fmt.Errorf("reading the last known zonal shifts: %w", lerr))
		}
		return nil, err
	}
	r.shifts, r.readAt = Shifts(out.ZonalShifts), now
	return zonalshift.Active(r.shifts, now), nil
}

func (r *Reader) warn(msg string, err error, attrs ...any) {
	if r.Log != nil {
		r.Log.Warn(msg, append(attrs, "error", err)...)
	}
}

// Shifts converts ARC's answer to plain data.
func Shifts(in []arctypes.ZonalShiftInResource) []zonalshift.Shift {
	out := make([]zonalshift.Shift, 0, len(in))
	for _, s := range in {
		out = append(out, zonalshift.Shift{
			AwayFrom: aws.ToString(s.AwayFrom),
			Expiry:   aws.ToTime(s.ExpiryTime),
			Applied:  s.AppliedStatus == arctypes.AppliedStatusApplied,
		})
	}
	return out
}
