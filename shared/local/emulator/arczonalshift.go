package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// ARC zonal shift (REST-JSON, signing name arc-zonal-shift): GetManagedResource
// (GET /managedresources/{resourceIdentifier}), StartZonalShift (POST
// /zonalshifts), UpdateZonalShift (PATCH /zonalshifts/{id}) and
// CancelZonalShift (DELETE /zonalshifts/{id}), on the wire as ARC answers
// them, so the SDK's client reads them; RegisterZonalShift,
// StartZonalShift and CancelZonalShift are the same for tests, in Go.
//
// Hostile as ARC is: a cluster is not registered until its zonal shift is
// enabled (ResourceNotFoundException), and a shift stays listed for
// ExpiredShiftListed after its expiry, its status still APPLIED, so a
// reader that does not compare ExpiryTime with the time keeps a zone
// shifted that no longer is.
const (
	arcManagedPrefix = "/managedresources"
	arcShiftsPrefix  = "/zonalshifts"
	// ExpiredShiftListed is how long an expired shift is still listed.
	ExpiredShiftListed = 10 * time.Minute
)

type zonalShift struct {
	ID, Resource, AwayFrom, Comment string
	Start, Expiry                   time.Time
	Cancelled                       bool
}

// RegisterZonalShift enables zonal shift on the cluster of that name (EKS
// zonalShiftConfig.enabled): ARC then knows it.
func (e *Emulator) RegisterZonalShift(cluster string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.world.clusters[cluster]
	if !ok {
		return fmt.Errorf("no cluster %s", cluster)
	}
	c.zonalShift = true
	return nil
}

// ClusterARN is the ARN of the cluster of that name, ARC's resource identifier.
func (e *Emulator) ClusterARN(cluster string) string {
	return fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", e.cfg.Region, e.cfg.AccountID, cluster)
}

// StartZonalShift shifts the resource away from a zone ID for expiresIn,
// as StartZonalShift; it returns the shift's ID.
func (e *Emulator) StartZonalShift(resourceARN, awayFrom string, expiresIn time.Duration) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.startZonalShift(resourceARN, awayFrom, expiresIn, "")
	if err != nil {
		return "", fmt.Errorf("%s: %s", err.Code, err.Message)
	}
	return s.ID, nil
}

// CancelZonalShift ends a shift at once, as CancelZonalShift.
func (e *Emulator) CancelZonalShift(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.cancelZonalShift(id); err != nil {
		return fmt.Errorf("%s: %s", err.Code, err.Message)
	}
	return nil
}

// clusterByARN is the registered cluster of that ARN; callers hold e.mu.
func (e *Emulator) clusterByARN(arn string) *eksCluster {
	for _, c := range e.world.clusters {
		if c.ARN == arn && c.zonalShift {
			return c
		}
	}
	return nil
}

// callers hold e.mu.
func (e *Emulator) startZonalShift(resource, awayFrom string, expiresIn time.Duration, comment string) (*zonalShift, *apiError) {
	c := e.clusterByARN(resource)
	if c == nil {
		return nil, errorf(404, "ResourceNotFoundException", "The resource %s was not found.", resource)
	}
	if !e.zoneIDKnown(awayFrom) {
		return nil, errorf(400, "ValidationException", "The Availability Zone %s is not valid for the resource.", awayFrom)
	}
	if expiresIn <= 0 || expiresIn > 3*24*time.Hour {
		return nil, errorf(400, "ValidationException", "expiresIn must be between 1 minute and 3 days.")
	}
	now := e.now()
	for _, s := range e.world.zonalShifts {
		if s.Resource == resource && !s.Cancelled && s.Expiry.After(now) {
			return nil, errorf(409, "ConflictException", "A zonal shift %s is already active for the resource.", s.ID)
		}
	}
	s := &zonalShift{ID: e.newUUID(), Resource: resource, AwayFrom: awayFrom, Comment: comment, Start: now, Expiry: now.Add(expiresIn)}
	e.world.zonalShifts = append(e.world.zonalShifts, s)
	return s, nil
}

// callers hold e.mu.
func (e *Emulator) cancelZonalShift(id string) (*zonalShift, *apiError) {
	for _, s := range e.world.zonalShifts {
		if s.ID == id && !s.Cancelled {
			if !s.Expiry.After(e.now()) {
				return nil, errorf(409, "ConflictException", "The zonal shift %s has expired.", id)
			}
			s.Cancelled = true
			return s, nil
		}
	}
	return nil, errorf(404, "ResourceNotFoundException", "The zonal shift %s was not found.", id)
}

// zoneIDKnown reports whether the region has a zone of that ID; callers hold e.mu.
func (e *Emulator) zoneIDKnown(id string) bool {
	for _, z := range e.cfg.Zones {
		if z.ID == id {
			return true
		}
	}
	return false
}

// newUUID is an ARC-style identifier; callers hold e.mu.
func (e *Emulator) newUUID() string {
	h := e.hexID("zonalshift", 32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func (e *Emulator) serveARC(w http.ResponseWriter, hr *http.Request, body []byte) {
	action, ident := "", ""
	switch {
	case strings.HasPrefix(hr.URL.EscapedPath(), arcManagedPrefix+"/") && hr.Method == http.MethodGet:
		action, ident = "GetManagedResource", strings.TrimPrefix(hr.URL.EscapedPath(), arcManagedPrefix+"/")
	case hr.URL.Path == arcShiftsPrefix && hr.Method == http.MethodPost:
		action = "StartZonalShift"
	case strings.HasPrefix(hr.URL.Path, arcShiftsPrefix+"/") && hr.Method == http.MethodPatch:
		action, ident = "UpdateZonalShift", strings.TrimPrefix(hr.URL.EscapedPath(), arcShiftsPrefix+"/")
	case strings.HasPrefix(hr.URL.Path, arcShiftsPrefix+"/") && hr.Method == http.MethodDelete:
		action, ident = "CancelZonalShift", strings.TrimPrefix(hr.URL.EscapedPath(), arcShiftsPrefix+"/")
	default:
		action = hr.Method + " " + hr.URL.Path
	}
	if u, err := url.PathUnescape(ident); err == nil {
		ident = u
	}
	r := &request{service: "arc-zonal-shift", action: action, params: url.Values{"identifier": {ident}}, body: body, http: hr}
	var h handlerFunc = func(e *Emulator, r *request) (any, *apiError) {
		switch action {
		case "GetManagedResource":
			return e.getManagedResource(ident)
		case "StartZonalShift":
			var in struct {
				ResourceIdentifier, AwayFrom, ExpiresIn, Comment string
			}
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, errorf(400, "ValidationException", "malformed request: %v", err)
			}
			d, err := arcDuration(in.ExpiresIn)
			if err != nil {
				return nil, err
			}
			s, err := e.startZonalShift(in.ResourceIdentifier, in.AwayFrom, d, in.Comment)
			if err != nil {
				return nil, err
			}
			return e.zonalShiftJSON(s), nil
		case "UpdateZonalShift":
			var in struct{ ExpiresIn, Comment string }
			if err := json.Unmarshal(body, &in); err != nil {
				return nil, errorf(400, "ValidationException", "malformed request: %v", err)
			}
			d, apiErr := arcDuration(in.ExpiresIn)
			if apiErr != nil {
				return nil, apiErr
			}
			for _, s := range e.world.zonalShifts {
				if s.ID == ident && !s.Cancelled && s.Expiry.After(e.now()) {
					s.Expiry = e.now().Add(d)
					return e.zonalShiftJSON(s), nil
				}
			}
			return nil, errorf(404, "ResourceNotFoundException", "The zonal shift %s was not found.", ident)
		case "CancelZonalShift":
			s, err := e.cancelZonalShift(ident)
			if err != nil {
				return nil, err
			}
			return e.zonalShiftJSON(s), nil
		}
		return nil, errorf(404, "UnknownOperationException", "%s is not emulated", action)
	}
	e.dispatch(w, r, h, restJSONWriter{})
}

// arcDuration reads ARC's expiresIn: a number and m (minutes) or h (hours).
func arcDuration(s string) (time.Duration, *apiError) {
	if len(s) >= 2 && (strings.HasSuffix(s, "m") || strings.HasSuffix(s, "h")) {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
	}
	return 0, errorf(400, "ValidationException", "expiresIn %q must be minutes (30m) or hours (12h).", s)
}

// getManagedResource answers GetManagedResource; callers hold e.mu.
func (e *Emulator) getManagedResource(ident string) (any, *apiError) {
	c := e.clusterByARN(ident)
	if c == nil {
		return nil, errorf(404, "ResourceNotFoundException", "The resource %s was not found.", ident)
	}
	now := e.now()
	shifts := []any{}
	weights := map[string]float64{}
	for _, z := range e.cfg.Zones {
		weights[z.ID] = 1
	}
	listed := append([]*zonalShift(nil), e.world.zonalShifts...)
	sort.Slice(listed, func(a, b int) bool { return listed[a].Start.Before(listed[b].Start) })
	for _, s := range listed {
		if s.Resource != ident || s.Cancelled || now.Sub(s.Expiry) > ExpiredShiftListed {
			continue
		}
		if s.Expiry.After(now) {
			weights[s.AwayFrom] = 0
		}
		shifts = append(shifts, map[string]any{
			"zonalShiftId": s.ID, "resourceIdentifier": s.Resource, "awayFrom": s.AwayFrom,
			"appliedStatus": "APPLIED", "startTime": epochSeconds(s.Start), "expiryTime": epochSeconds(s.Expiry),
			"comment": s.Comment, "shiftType": "ZONAL_SHIFT",
		})
	}
	return map[string]any{
		"arn": c.ARN, "name": c.Name, "appliedWeights": weights, "zonalShifts": shifts, "autoshifts": []any{},
		"zonalAutoshiftStatus": "DISABLED",
	}, nil
}

func (e *Emulator) zonalShiftJSON(s *zonalShift) map[string]any {
	status := "ACTIVE"
	switch {
	case s.Cancelled:
		status = "CANCELED"
	case !s.Expiry.After(e.now()):
		status = "EXPIRED"
	}
	return map[string]any{
		"zonalShiftId": s.ID, "resourceIdentifier": s.Resource, "awayFrom": s.AwayFrom,
		"startTime": epochSeconds(s.Start), "expiryTime": epochSeconds(s.Expiry), "status": status, "comment": s.Comment,
	}
}
