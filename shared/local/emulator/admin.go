package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// AdminPrefix is the path prefix of the emulator's own control API, which
// `karpless local` uses to reach a running emulator from another process.
// It is not an AWS API: no SDK client calls it.
const AdminPrefix = "/_localaws/"

// TerminateAfter schedules the termination of instances d from now on the
// clock, as EC2 does two minutes after a spot interruption warning.
func (e *Emulator) TerminateAfter(ids []string, d time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	at := e.now().Add(d)
	for _, id := range ids {
		i, ok := e.world.instByID[id]
		if !ok {
			return fmt.Errorf("emulator: no instance %s", id)
		}
		i.terminate = at
	}
	return nil
}

// faultJSON is a Fault on the admin API (latency as a Go duration string).
type faultJSON struct {
	Kind         string `json:"kind"`
	Service      string `json:"service,omitempty"`
	Action       string `json:"action,omitempty"`
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	CapacityType string `json:"capacityType,omitempty"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
	Status       int    `json:"status,omitempty"`
	Latency      string `json:"latency,omitempty"`
	Count        int    `json:"count,omitempty"`
}

var faultKinds = map[string]FaultKind{
	"api-error": FaultAPIError, "throttle": FaultThrottle, "fleet-error": FaultFleetError,
	"latency": FaultLatency, "drop-after-apply": FaultDropAfterApply,
}

func toFaultJSON(f Fault) faultJSON {
	j := faultJSON{Kind: f.Kind.String(), Service: f.Service, Action: f.Action, InstanceType: f.InstanceType, Zone: f.Zone,
		CapacityType: f.CapacityType, Code: f.Code, Message: f.Message, Status: f.Status, Count: f.Count}
	if f.Latency > 0 {
		j.Latency = f.Latency.String()
	}
	return j
}

func (j faultJSON) fault() (Fault, error) {
	k, ok := faultKinds[j.Kind]
	if !ok {
		return Fault{}, fmt.Errorf("unknown fault kind %q", j.Kind)
	}
	f := Fault{Kind: k, Service: j.Service, Action: j.Action, InstanceType: j.InstanceType, Zone: j.Zone,
		CapacityType: j.CapacityType, Code: j.Code, Message: j.Message, Status: j.Status, Count: j.Count}
	if j.Latency != "" {
		d, err := time.ParseDuration(j.Latency)
		if err != nil {
			return Fault{}, err
		}
		f.Latency = d
	}
	if (k == FaultAPIError || k == FaultFleetError) && f.Code == "" {
		return Fault{}, fmt.Errorf("a %s fault needs a code", j.Kind)
	}
	return f, nil
}

// serveAdmin answers the control API:
//
//	GET    /_localaws/instances           every instance, with tags (JSON)
//	POST   /_localaws/terminate           {"instanceIds": [...], "after": "2m"}
//	GET    /_localaws/faults              the active fault rules
//	POST   /_localaws/faults              add a rule (kind, action, code, ...)
//	DELETE /_localaws/faults              remove every rule
//	POST   /_localaws/amis                {"release": "v20261001"}: UpdateAMIs
//	GET    /_localaws/hostile-events      what hostility did so far (HostileEvents)
func (e *Emulator) serveAdmin(w http.ResponseWriter, r *http.Request, body []byte) {
	reply := func(v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	switch strings.TrimPrefix(r.URL.Path, AdminPrefix) + " " + r.Method {
	case "instances GET":
		reply(e.Instances(nil), nil)
	case "terminate POST":
		var in struct {
			InstanceIDs []string `json:"instanceIds"`
			After       string   `json:"after"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			reply(nil, err)
			return
		}
		d, err := time.ParseDuration(in.After)
		if err == nil {
			err = e.TerminateAfter(in.InstanceIDs, d)
		}
		reply(map[string]any{"scheduled": in.InstanceIDs}, err)
	case "faults GET":
		var out []faultJSON
		for _, f := range e.Faults() {
			out = append(out, toFaultJSON(f))
		}
		reply(out, nil)
	case "faults POST":
		var j faultJSON
		if err := json.Unmarshal(body, &j); err != nil {
			reply(nil, err)
			return
		}
		f, err := j.fault()
		if err != nil {
			reply(nil, err)
			return
		}
		reply(map[string]int{"id": int(e.Inject(f))}, nil)
	case "faults DELETE":
		e.ClearFaults()
		reply(map[string]bool{"cleared": true}, nil)
	case "amis POST":
		var in struct {
			Release string `json:"release"`
		}
		if err := json.Unmarshal(body, &in); err != nil || in.Release == "" {
			reply(nil, fmt.Errorf("want {\"release\": \"vYYYYMMDD\"}"))
			return
		}
		reply(e.UpdateAMIs(in.Release), nil)
	case "hostile-events GET":
		reply(e.HostileEvents(), nil)
	default:
		http.Error(w, "unknown admin call "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

// Admin is a client of a running emulator's control API.
type Admin struct {
	// URL is the emulator's endpoint (AWS_ENDPOINT_URL).
	URL    string
	Client *http.Client
}

func (a Admin) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.URL, "/")+AdminPrefix+path, body)
	if err != nil {
		return err
	}
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("reaching the emulator at %s: %w", a.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("emulator: %s", e.Error)
		}
		return fmt.Errorf("emulator: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Instances lists every instance of the running emulator.
func (a Admin) Instances(ctx context.Context) ([]Instance, error) {
	var out []Instance
	err := a.call(ctx, http.MethodGet, "instances", nil, &out)
	return out, err
}

// TerminateAfter schedules terminations on the emulator's clock.
func (a Admin) TerminateAfter(ctx context.Context, ids []string, d time.Duration) error {
	return a.call(ctx, http.MethodPost, "terminate", map[string]any{"instanceIds": ids, "after": d.String()}, nil)
}

// Inject adds a fault rule.
func (a Admin) Inject(ctx context.Context, f Fault) error {
	return a.call(ctx, http.MethodPost, "faults", toFaultJSON(f), nil)
}

// ClearFaults removes every fault rule.
func (a Admin) ClearFaults(ctx context.Context) error {
	return a.call(ctx, http.MethodDelete, "faults", nil, nil)
}

// Faults lists the active fault rules.
func (a Admin) Faults(ctx context.Context) ([]Fault, error) {
	var js []faultJSON
	if err := a.call(ctx, http.MethodGet, "faults", nil, &js); err != nil {
		return nil, err
	}
	var out []Fault
	for _, j := range js {
		f, err := j.fault()
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// UpdateAMIs publishes a new AMI release.
func (a Admin) UpdateAMIs(ctx context.Context, release string) ([]Image, error) {
	var out []Image
	err := a.call(ctx, http.MethodPost, "amis", map[string]string{"release": release}, &out)
	return out, err
}

// HostileEvents counts what the emulator's hostility did so far, for a
// soak's report.
func (a Admin) HostileEvents(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	err := a.call(ctx, http.MethodGet, "hostile-events", nil, &out)
	return out, err
}
