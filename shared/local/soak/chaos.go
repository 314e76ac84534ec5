package soak

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/karpless/karpless/shared/apis/karpenter/v1"
	"github.com/karpless/karpless/shared/core/timing"
	"github.com/karpless/karpless/shared/core/wellknown"
	"github.com/karpless/karpless/shared/local/deploy"
	"github.com/karpless/karpless/shared/local/emulator"
)

// workloadNamespace holds the soak's workloads.
const workloadNamespace = "soak"

// deployment is one workload the chaos schedule scales.
type deployment struct {
	name     string
	min, max int32
	cpu, mem string
	// shape adds the workload's constraints to its pod template.
	shape func(*corev1.PodTemplateSpec)
	// pdbMaxUnavailable, when set, protects the workload with a PDB.
	pdbMaxUnavailable int
}

// workloads are the Deployments: zone and hostname spread, a PDB, a
// do-not-disrupt pod, an arm64 preference, a GPU.
func workloads() []deployment {
	return []deployment{
		{name: "web", min: 2, max: 9, cpu: "500m", mem: "512Mi", pdbMaxUnavailable: 1, shape: func(t *corev1.PodTemplateSpec) {
			t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: wellknown.ZoneLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: t.Labels},
			}}
		}},
		{name: "api", min: 1, max: 5, cpu: "1", mem: "1Gi", shape: func(t *corev1.PodTemplateSpec) {
			t.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: wellknown.HostnameLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: t.Labels},
			}}
		}},
		{name: "small", min: 0, max: 12, cpu: "200m", mem: "256Mi", shape: func(t *corev1.PodTemplateSpec) {
			t.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: wellknown.ArchLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}},
			}}}}
		}},
		{name: "pinned", min: 1, max: 2, cpu: "250m", mem: "256Mi", shape: func(t *corev1.PodTemplateSpec) {
			t.Annotations = map[string]string{wellknown.DoNotDisruptAnnotation: "true"}
		}},
		{name: "gpu", min: 0, max: 1, cpu: "500m", mem: "1Gi", shape: func(t *corev1.PodTemplateSpec) {
			t.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			c := &t.Spec.Containers[0]
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			c.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}},
	}
}

// pools are the NodePools the soak starts with: a general pool with spot
// and on-demand, both architectures, expiry and a grace period, and a GPU
// pool with its taint.
func pools() []*karpv1.NodePool {
	general := deploy.DefaultNodePool("general")
	general.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	general.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("1m")
	general.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "20%"}}
	general.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration("3h")
	general.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Minute}
	// A limit far above what the workload needs: a simulation with no
	// nodes reserves each new claim's largest type against it.
	general.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4000")}
	general.Spec.Weight = new(int32(10))

	gpu := deploy.DefaultNodePool("gpu",
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceGPUManufacturerLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"nvidia"}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.CapacityTypeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{wellknown.CapacityTypeOnDemand}},
		karpv1.NodeSelectorRequirementWithMinValues{Key: wellknown.InstanceGPUCountLabel, Operator: corev1.NodeSelectorOpLt, Values: []string{"2"}},
	)
	gpu.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	gpu.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	gpu.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration("2m")
	return []*karpv1.NodePool{general, gpu}
}

// setupWorkload creates the node class, the pools, a DaemonSet, the
// Deployments at random sizes and their PDBs.
func (w *world) setupWorkload(ctx context.Context) error {
	if err := deploy.Apply(ctx, w.admin, deploy.DefaultNodeClass(clusterName, "al2023@latest"), pools()...); err != nil {
		return err
	}
	core := w.admin.Core
	if _, err := core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	agent := map[string]string{"app": "agent"}
	if _, err := core.AppsV1().DaemonSets(workloadNamespace).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: agent}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: agent},
			Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, Containers: []corev1.Container{{
				Name: "agent", Image: "registry.local/agent:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			}}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating daemonset: %w", err)
	}
	for _, d := range workloads() {
		labels := map[string]string{"app": d.name}
		tmpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64(5)), Containers: []corev1.Container{{
				Name: "app", Image: "registry.local/" + d.name + ":1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(d.cpu), corev1.ResourceMemory: resource.MustParse(d.mem)}},
			}}},
		}
		if d.shape != nil {
			d.shape(&tmpl)
		}
		replicas := d.min + int32(w.intn(int(d.max-d.min)+1))
		if _, err := core.AppsV1().Deployments(workloadNamespace).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: d.name},
			Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
		}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating deployment %s: %w", d.name, err)
		}
		if d.pdbMaxUnavailable > 0 {
			mu := intstr.FromInt32(int32(d.pdbMaxUnavailable))
			if _, err := core.PolicyV1().PodDisruptionBudgets(workloadNamespace).Create(ctx, &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Name: d.name},
				Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: labels}},
			}, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating pdb %s: %w", d.name, err)
			}
		}
		w.inv.note("workload %s starts with %d replicas", d.name, replicas)
	}
	return nil
}

// chaos is the seeded schedule of things that happen to the cluster.
type chaos struct {
	w    *world
	next time.Time
	// jobs end at these times (the fake kubelet runs pods forever).
	jobs map[string]time.Time
	// ice are capacity removals to lift, by fault id.
	ice     map[emulator.FaultID]time.Time
	jobSeq  int
	amiSeq  int
	actions int // faults the schedule injected (interruptions, ICE, edits, AMIs)
}

func newChaos(w *world) *chaos {
	c := &chaos{w: w, jobs: map[string]time.Time{}, ice: map[emulator.FaultID]time.Time{}}
	c.schedule()
	return c
}

// meanGap is the mean virtual time between two chaos events.
const meanGap = 75 * time.Second

func (c *chaos) schedule() {
	c.w.rngMu.Lock()
	gap := time.Duration(c.w.rng.ExpFloat64() * float64(meanGap))
	c.w.rngMu.Unlock()
	c.next = c.w.now().Add(max(gap, 5*time.Second))
}

// nextAt is when the schedule next needs the clock to stop.
func (c *chaos) nextAt() time.Time {
	t := c.next
	for _, end := range c.jobs {
		if end.Before(t) {
			t = end
		}
	}
	for _, end := range c.ice {
		if end.Before(t) {
			t = end
		}
	}
	return t
}

// liftAll gives back every capacity the schedule took away.
func (c *chaos) liftAll() {
	for id := range c.ice {
		c.w.emu.RemoveFault(id)
		delete(c.ice, id)
		c.w.inv.outage(id, "", "", false)
	}
}

// due ends what has run its course: capacity comes back, jobs finish.
func (c *chaos) due(ctx context.Context) {
	now := c.w.now()
	for id, end := range c.ice {
		if !now.Before(end) {
			c.w.emu.RemoveFault(id)
			delete(c.ice, id)
			c.w.inv.outage(id, "", "", false)
			c.w.inv.note("capacity comes back (fault %d lifted)", id)
		}
	}
	for name, end := range c.jobs {
		if !now.Before(end) {
			c.finishJob(ctx, name)
			delete(c.jobs, name)
		}
	}
}

// act takes the next scheduled action, if it is due.
func (c *chaos) act(ctx context.Context) {
	if c.w.now().Before(c.next) {
		return
	}
	c.schedule()
	type action struct {
		weight float64
		do     func(context.Context)
	}
	actions := []action{
		{6, func(ctx context.Context) { c.w.nudgeRandomDeployment(ctx, "churn") }},
		{1, func(ctx context.Context) { c.w.deleteRandomPod(ctx, "churn") }},
		{1, func(ctx context.Context) {
			if !c.deleteDrainingPod(ctx) {
				c.w.deleteRandomPod(ctx, "churn")
			}
		}},
		{2, c.startJob},
		{1.5, func(ctx context.Context) { c.interrupt(ctx, emulator.EventSpotInterruption) }},
		{0.5, func(ctx context.Context) { c.interrupt(ctx, emulator.EventRebalance) }},
		{0.3, func(ctx context.Context) { c.interrupt(ctx, emulator.EventScheduledChange) }},
		{0.2, c.impair},
		{0.15, c.releaseAMI},
		{0.6, c.editNodePool},
		{0.6, c.takeCapacity},
	}
	total := 0.0
	for _, a := range actions {
		total += a.weight
	}
	c.w.rngMu.Lock()
	pick := c.w.rng.Float64() * total
	c.w.rngMu.Unlock()
	for _, a := range actions {
		if pick < a.weight {
			a.do(ctx)
			return
		}
		pick -= a.weight
	}
}

// nudgeRandomDeployment sets a random workload to a random size in its range.
func (w *world) nudgeRandomDeployment(ctx context.Context, why string) {
	all := workloads()
	d := all[w.intn(len(all))]
	n := d.min + int32(w.intn(int(d.max-d.min)+1))
	dep, err := w.admin.Core.AppsV1().Deployments(workloadNamespace).Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		return
	}
	from := *dep.Spec.Replicas
	dep.Spec.Replicas = &n
	if _, err := w.admin.Core.AppsV1().Deployments(workloadNamespace).Update(ctx, dep, metav1.UpdateOptions{}); err == nil && from != n {
		w.inv.note("%s: %s scales %d -> %d", why, d.name, from, n)
	}
}

// scale sets a workload's replicas.
func (w *world) scale(ctx context.Context, name string, n int32) {
	dep, err := w.admin.Core.AppsV1().Deployments(workloadNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	dep.Spec.Replicas = &n
	if _, err := w.admin.Core.AppsV1().Deployments(workloadNamespace).Update(ctx, dep, metav1.UpdateOptions{}); err == nil {
		w.inv.note("churn: %s scaled to %d", name, n)
	}
}

// deleteRandomPod deletes a running workload pod (its controller makes a
// new one, which kube-scheduler places).
func (w *world) deleteRandomPod(ctx context.Context, why string) {
	var running []corev1.Pod
	for _, p := range w.pods(ctx) {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Labels["app"] != "agent" {
			running = append(running, p)
		}
	}
	if len(running) == 0 {
		return
	}
	p := running[w.intn(len(running))]
	if err := w.admin.Core.CoreV1().Pods(workloadNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err == nil {
		w.inv.note("%s: pod %s deleted by its owner", why, p.Name)
	}
}

// deleteDrainingPod deletes, as its owner might, a pod on a node that is
// being drained (tainted karpenter.sh/disrupted), so that the drain meets
// a pod already terminating: it must neither evict it again nor wait on
// it past its own grace. It reports whether a node was draining.
func (c *chaos) deleteDrainingPod(ctx context.Context) bool {
	w := c.w
	nodes, err := w.admin.Core.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	draining := map[string]bool{}
	for _, n := range nodes.Items {
		for _, t := range n.Spec.Taints {
			if t.Key == wellknown.DisruptedTaintKey {
				draining[n.Name] = true
			}
		}
	}
	var on []corev1.Pod
	for _, p := range w.pods(ctx) {
		if draining[p.Spec.NodeName] && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Labels["app"] != "agent" {
			on = append(on, p)
		}
	}
	if len(on) == 0 {
		return false
	}
	p := on[w.intn(len(on))]
	grace := int64(30)
	if err := w.admin.Core.CoreV1().Pods(workloadNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		return false
	}
	w.cov.terminating.Add(1)
	w.inv.note("churn: pod %s on draining node %s deleted by its owner", p.Name, p.Spec.NodeName)
	return true
}

// startJob starts a batch Job that runs for a few minutes, half of them on
// arm64 only.
func (c *chaos) startJob(ctx context.Context) {
	parallel := int32(1 + c.w.intn(3))
	runFor := time.Duration(3+c.w.intn(10)) * time.Minute
	arch := "any"
	if c.w.chance(0.5) {
		arch = "arm64"
	}
	c.job(ctx, parallel, "1", arch, runFor)
}

// burst starts a Job of two pods too big to fit beside the workload (3.5
// CPUs each, each alone on its node): new nodes must launch for it.
func (c *chaos) burst(ctx context.Context) {
	c.job(ctx, 2, "3500m", "any", 4*time.Minute)
}

// job starts a Job of parallel pods of cpu each, on arch ("any" or
// "arm64"), that completes after runFor.
func (c *chaos) job(ctx context.Context, parallel int32, cpu, arch string, runFor time.Duration) {
	c.jobSeq++
	name := fmt.Sprintf("batch-%d", c.jobSeq)
	spec := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: new(int64(5)), Containers: []corev1.Container{{
		Name: "job", Image: "registry.local/batch:1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}}}
	if arch == "arm64" {
		spec.NodeSelector = map[string]string{wellknown.ArchLabel: "arm64"}
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{Parallelism: &parallel, Completions: &parallel, BackoffLimit: new(int32(100)),
			TTLSecondsAfterFinished: new(int32(60)),
			Template:                corev1.PodTemplateSpec{Spec: spec}},
	}
	if _, err := c.w.admin.Core.BatchV1().Jobs(workloadNamespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return
	}
	c.jobs[name] = c.w.now().Add(runFor)
	c.w.inv.note("churn: job %s starts (%d pods of %s CPU, %s, runs %s)", name, parallel, cpu, arch, runFor)
}

// finishJob marks the job's running pods Succeeded, as their kubelet would
// when the containers exit; pods still pending finish when they run.
func (c *chaos) finishJob(ctx context.Context, name string) {
	l, err := c.w.admin.Core.CoreV1().Pods(workloadNamespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		c.jobs[name] = c.w.now().Add(time.Minute)
		return
	}
	left := false
	for _, p := range l.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			left = left || (p.Status.Phase == corev1.PodPending)
			continue
		}
		p.Status.Phase = corev1.PodSucceeded
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
			p.Status.ContainerStatuses[i].Ready = false
		}
		_, _ = c.w.admin.Core.CoreV1().Pods(workloadNamespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{})
	}
	if left {
		c.jobs[name] = c.w.now().Add(time.Minute)
		return
	}
	c.w.inv.note("churn: job %s completes", name)
}

// interrupt sends an interruption-kind event for one of the cluster's
// instances (a spot one for spot interruptions and rebalances).
func (c *chaos) interrupt(ctx context.Context, kind emulator.EventKind) {
	spotOnly := kind == emulator.EventSpotInterruption || kind == emulator.EventRebalance
	live := c.w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StateRunning && i.NodeName != "" && (!spotOnly || i.CapacityType == "spot")
	})
	if len(live) == 0 {
		return
	}
	i := live[c.w.intn(len(live))]
	ev := emulator.Event{Kind: kind, InstanceIDs: []string{i.ID}}
	if kind == emulator.EventSpotInterruption {
		ev.TerminateAfter = 2 * time.Minute
	}
	if _, err := c.w.emu.InjectEvent(ev); err != nil {
		return
	}
	c.actions++
	c.w.inv.note("fault: EC2 sends %s for %s (%s %s, node %s)", kind, i.ID, i.InstanceType, i.CapacityType, i.NodeName)
}

// impair makes EC2 report a running instance broken (its instance or
// system status check failed) or scheduled for retirement, as
// DescribeInstanceStatus shows it; nothing comes through the queue.
func (c *chaos) impair(context.Context) {
	live := c.w.emu.Instances(func(i emulator.Instance) bool {
		return i.State == emulator.StateRunning && i.NodeName != ""
	})
	if len(live) == 0 {
		return
	}
	i := live[c.w.intn(len(live))]
	var h emulator.InstanceHealth
	what, due := "", c.w.now().Add(timing.InstanceStatusThreshold)
	switch c.w.intn(3) {
	case 0:
		h.InstanceImpaired, what = true, "its instance status check failed"
	case 1:
		h.SystemImpaired, what = true, "its system status check failed"
	default:
		h.Events = []emulator.ScheduledEvent{{Code: "instance-retirement", NotBefore: c.w.now().Add(48 * time.Hour)}}
		what, due = "a retirement scheduled", c.w.now()
	}
	if err := c.w.emu.SetInstanceHealth(i.ID, h); err != nil {
		return
	}
	c.w.inv.impairedAt(i.ID, due)
	c.actions++
	c.w.inv.note("fault: EC2 reports %s (%s %s, node %s): %s", i.ID, i.InstanceType, i.CapacityType, i.NodeName, what)
}

// releaseAMI publishes a new EKS AMI release: al2023@latest moves, the
// nodes drift.
func (c *chaos) releaseAMI(context.Context) {
	c.amiSeq++
	release := fmt.Sprintf("v2027%02d%02d", 1+c.amiSeq/28%12, 1+c.amiSeq%28)
	imgs := c.w.emu.UpdateAMIs(release)
	c.actions++
	c.w.inv.note("fault: EKS publishes AMI release %s (%d images)", release, len(imgs))
}

// editNodePool changes the general pool as its owners do: what types it
// may use (drift), how soon it consolidates, its budget, its expiry.
func (c *chaos) editNodePool(ctx context.Context) {
	np, err := c.w.admin.NodePools.Get(ctx, "general", metav1.GetOptions{})
	if err != nil {
		return
	}
	var what string
	var before []karpv1.Budget
	budgets := false
	switch c.w.intn(4) {
	case 0:
		for i, r := range np.Spec.Template.Spec.Requirements {
			if r.Key == wellknown.InstanceCategoryLabel {
				if slices.Contains(r.Values, "r") {
					np.Spec.Template.Spec.Requirements[i].Values = []string{"c", "m"}
				} else {
					np.Spec.Template.Spec.Requirements[i].Values = []string{"c", "m", "r"}
				}
				what = fmt.Sprintf("instance categories %v", np.Spec.Template.Spec.Requirements[i].Values)
			}
		}
	case 1:
		v := []string{"30s", "1m", "5m"}[c.w.intn(3)]
		np.Spec.Disruption.ConsolidateAfter = karpv1.MustParseNillableDuration(v)
		what = "consolidateAfter " + v
	case 2:
		v := []string{"10%", "20%", "50%", "2"}[c.w.intn(4)]
		before, budgets = np.Spec.Disruption.Budgets, true
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: v}}
		what = "budget nodes " + v
	case 3:
		v := []string{"2h", "3h", "Never"}[c.w.intn(3)]
		np.Spec.Template.Spec.ExpireAfter = karpv1.MustParseNillableDuration(v)
		what = "expireAfter " + v
	}
	if _, err := c.w.admin.NodePools.Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		return
	}
	if budgets {
		c.w.inv.budgetsEdited(np.Name, before)
	}
	c.actions++
	c.w.inv.note("fault: NodePool general edited: %s", what)
}

// takeCapacity makes EC2 run out of a kind of capacity for a while: spot
// or on-demand in one zone, or one instance type everywhere.
func (c *chaos) takeCapacity(context.Context) {
	zones := []string{"us-west-2a", "us-west-2b", "us-west-2c"}
	ct := []string{"spot", "on-demand"}[c.w.intn(2)]
	var f emulator.Fault
	var what, zone string
	if c.w.chance(0.5) {
		z := zones[c.w.intn(len(zones))]
		f, what, zone = emulator.ICE(ct, "", z), fmt.Sprintf("%s capacity in %s", ct, z), z
	} else {
		live := c.w.emu.Instances(func(i emulator.Instance) bool { return i.State == emulator.StateRunning })
		if len(live) == 0 {
			return
		}
		t := live[c.w.intn(len(live))].InstanceType
		f, what = emulator.ICE(ct, t, ""), fmt.Sprintf("%s %s capacity everywhere", ct, t)
	}
	dur := time.Duration(5+c.w.intn(11)) * time.Minute
	id := c.w.emu.Inject(f)
	c.ice[id] = c.w.now().Add(dur)
	if zone != "" {
		c.w.inv.outage(id, ct, zone, true)
	}
	c.actions++
	c.w.inv.note("fault: EC2 runs out of %s for %s", what, dur)
}
