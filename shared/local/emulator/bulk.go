package emulator

import (
	"fmt"
	"maps"
)

// CloneInstances adds one running instance per element of tags, each a
// copy of the instance id (type, image, launch template, security groups,
// profile and tags, with that element's tags written over them) with its
// own ID, address and private DNS name, in the subnets that carry the same
// tags as id's, zone after zone. Each counts as having registered a Ready
// Node named by its private DNS name, so the fake kubelet creates none: the
// caller writes the Nodes itself, as fast as it likes. It is how scale
// benchmarks get thousands of instances without thousands of launches;
// the copies are visible to Describe* at once.
func (e *Emulator) CloneInstances(id string, tags []map[string]string) ([]Instance, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	src := e.world.instByID[id]
	if src == nil {
		return nil, fmt.Errorf("emulator: no instance %s to clone", id)
	}
	var subnets []*subnet
	for _, s := range e.world.subnets {
		if s.VPCID == src.VPCID && maps.Equal(s.Tags, src.subnet.Tags) {
			subnets = append(subnets, s)
		}
	}
	now := e.now()
	out := make([]Instance, 0, len(tags))
	for k, t := range tags {
		s := subnets[k%len(subnets)]
		ip, ok := e.allocateIP(s)
		if !ok {
			return out, fmt.Errorf("emulator: subnet %s is full after %d clones", s.ID, k)
		}
		i := &instance{subnet: s, lt: src.lt, boot: src.boot, family: src.family, runningAt: now, nodeState: nodeReady, nodeAt: now, visibleAt: now}
		i.Instance = src.copy()
		i.ID, i.Zone, i.ZoneID, i.SubnetID = e.newID("i"), s.Zone, s.ZoneID, s.ID
		i.PrivateIP, i.PrivateDNSName, i.NodeName = ip.String(), e.dnsName(ip), e.dnsName(ip)
		i.State, i.StateReason, i.LaunchTime, i.StateChanged = StateRunning, "", now, now
		i.FleetID, i.ClientToken, i.SpotRequestID = "", "", ""
		if i.CapacityType == CapacityTypeSpot {
			i.SpotRequestID = "sir-" + e.hexID("sir", 8)
		}
		maps.Copy(i.Tags, t)
		e.world.instances = append(e.world.instances, i)
		e.world.instByID[i.ID] = i
		out = append(out, i.copy())
	}
	return out, nil
}
