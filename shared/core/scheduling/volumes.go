package scheduling

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/karpless/karpless/shared/core/wellknown"
)

// hostPort is one <ip, port, protocol> a pod binds on its node.
type hostPort struct {
	ip    string // "" for the wildcard addresses 0.0.0.0 and ::
	port  int32
	proto corev1.Protocol
}

func (p hostPort) conflicts(o hostPort) bool {
	return p.port == o.port && p.proto == o.proto && (p.ip == "" || o.ip == "" || p.ip == o.ip)
}

func (p hostPort) String() string {
	ip := p.ip
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s:%d/%s", ip, p.port, p.proto)
}

func hostPorts(p *corev1.Pod) []hostPort {
	var out []hostPort
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.HostPort == 0 {
					continue
				}
				hp := hostPort{port: cp.HostPort, proto: cp.Protocol}
				if hp.proto == "" {
					hp.proto = corev1.ProtocolTCP
				}
				if ip := net.ParseIP(cp.HostIP); ip != nil && !ip.IsUnspecified() {
					hp.ip = ip.String()
				}
				out = append(out, hp)
			}
		}
	}
	return out
}

func portConflict(have, want []hostPort) *hostPort {
	for _, w := range want {
		for _, h := range have {
			if w.conflicts(h) {
				return &w
			}
		}
	}
	return nil
}

// volumeRef is a persistent volume a pod mounts, by the CSI driver that
// attaches it (for attach limits).
type volumeRef struct {
	id     string // namespace/claim
	driver string
}

// volumes indexes the snapshot's storage objects.
type volumes struct {
	pvcs    map[string]*corev1.PersistentVolumeClaim
	pvs     map[string]*corev1.PersistentVolume
	classes map[string]*storagev1.StorageClass
	limits  map[string]map[string]int64 // node -> driver -> attachable volumes
	// defaultClass is the cluster's default StorageClass ("" when none):
	// the one the API server's DefaultStorageClass admission (and the PV
	// controller, retroactively) gives a claim that names no class.
	defaultClass string
}

// Annotations that mark the default StorageClass and a claim whose binding
// the PV controller completed.
const (
	defaultClassAnnotation     = "storageclass.kubernetes.io/is-default-class"
	defaultClassBetaAnnotation = "storageclass.beta.kubernetes.io/is-default-class"
	bindCompletedAnnotation    = "pv.kubernetes.io/bind-completed"
)

// inTreeCSIDrivers maps in-tree volume plugins to the CSI drivers they
// migrated to (csi-translation-lib's names), so that volumes of a
// StorageClass still naming the in-tree provisioner count against the CSI
// driver's attach limits, as Karpenter counts them.
var inTreeCSIDrivers = map[string]string{
	"kubernetes.io/aws-ebs":         "ebs.csi.aws.com",
	"kubernetes.io/gce-pd":          "pd.csi.storage.gke.io",
	"kubernetes.io/cinder":          "cinder.csi.openstack.org",
	"kubernetes.io/azure-disk":      "disk.csi.azure.com",
	"kubernetes.io/azure-file":      "file.csi.azure.com",
	"kubernetes.io/vsphere-volume":  "csi.vsphere.vmware.com",
	"kubernetes.io/portworx-volume": "pxd.portworx.com",
}

// csiDriver is the CSI driver name of a provisioner, in-tree names mapped.
func csiDriver(provisioner string) string {
	if d, ok := inTreeCSIDrivers[provisioner]; ok {
		return d
	}
	return provisioner
}

// pvDriver is the CSI driver attaching a PersistentVolume, "" when it is
// neither a CSI volume nor an in-tree EBS one (not counted against limits).
func pvDriver(pv *corev1.PersistentVolume) string {
	switch {
	case pv.Spec.CSI != nil:
		return pv.Spec.CSI.Driver
	case pv.Spec.AWSElasticBlockStore != nil:
		return inTreeCSIDrivers["kubernetes.io/aws-ebs"]
	}
	return ""
}

// isDefaultClass reports whether a StorageClass is marked the default.
func isDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[defaultClassAnnotation] == "true" || sc.Annotations[defaultClassBetaAnnotation] == "true"
}

func newVolumes(s *Snapshot) *volumes {
	v := &volumes{pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}, limits: map[string]map[string]int64{}}
	for _, c := range s.PersistentVolumeClaims {
		if c != nil {
			v.pvcs[c.Namespace+"/"+c.Name] = c
		}
	}
	for _, pv := range s.PersistentVolumes {
		if pv != nil {
			v.pvs[pv.Name] = pv
		}
	}
	var def *storagev1.StorageClass
	for _, sc := range s.StorageClasses {
		if sc == nil {
			continue
		}
		v.classes[sc.Name] = sc
		// Of several defaults the newest wins, then the first by name, as
		// the API server picks one.
		if isDefaultClass(sc) && (def == nil || sc.CreationTimestamp.After(def.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&def.CreationTimestamp) && sc.Name < def.Name)) {
			def = sc
		}
	}
	if def != nil {
		v.defaultClass = def.Name
	}
	for _, cn := range s.CSINodes {
		if cn == nil {
			continue
		}
		m := map[string]int64{}
		for _, d := range cn.Spec.Drivers {
			if d.Allocatable != nil && d.Allocatable.Count != nil {
				m[d.Name] = int64(*d.Allocatable.Count)
			}
		}
		v.limits[cn.Name] = m
	}
	return v
}

// claimFor returns the claim name a pod volume uses, if it is a persistent
// one, and the template of an ephemeral one.
func claimFor(p *corev1.Pod, vol *corev1.Volume) (string, *corev1.PersistentVolumeClaimTemplate) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, nil
	case vol.Ephemeral != nil && vol.Ephemeral.VolumeClaimTemplate != nil:
		return p.Name + "-" + vol.Name, vol.Ephemeral.VolumeClaimTemplate
	}
	return "", nil
}

// podVolumes returns a pod's volume topology as alternatives (each a set of
// node requirements; one must hold), the volumes for attach limits, and an
// error a person can act on when a claim cannot be resolved.
func (v *volumes) podVolumes(p *corev1.Pod) ([]Requirements, []volumeRef, error) {
	alts := []Requirements{nil}
	var refs []volumeRef
	for i := range p.Spec.Volumes {
		name, tmpl := claimFor(p, &p.Spec.Volumes[i])
		if name == "" {
			continue
		}
		key := p.Namespace + "/" + name
		pvc := v.pvcs[key]
		var spec *corev1.PersistentVolumeClaimSpec
		var annotations map[string]string
		switch {
		case pvc != nil:
			if pvc.DeletionTimestamp != nil {
				return nil, nil, fmt.Errorf("PersistentVolumeClaim %s is being deleted", key)
			}
			if pvc.Status.Phase == corev1.ClaimLost {
				return nil, nil, fmt.Errorf("PersistentVolumeClaim %s is bound to a PersistentVolume that no longer exists", key)
			}
			spec, annotations = &pvc.Spec, pvc.Annotations
		case tmpl != nil:
			spec, annotations = &tmpl.Spec, tmpl.Annotations
		default:
			return nil, nil, fmt.Errorf("PersistentVolumeClaim %s does not exist", key)
		}
		var volAlts []Requirements
		driver := ""
		if spec.VolumeName != "" {
			// As the kube-scheduler (and Karpenter): a claim naming its
			// volume is bound only once the PV controller has marked it so.
			if _, ok := annotations[bindCompletedAnnotation]; !ok {
				return nil, nil, fmt.Errorf("PersistentVolumeClaim %s names PersistentVolume %s but is not bound yet (no %s annotation)", key, spec.VolumeName, bindCompletedAnnotation)
			}
			pv := v.pvs[spec.VolumeName]
			if pv == nil {
				return nil, nil, fmt.Errorf("PersistentVolume %s of claim %s does not exist", spec.VolumeName, key)
			}
			if pv.DeletionTimestamp != nil {
				return nil, nil, fmt.Errorf("PersistentVolume %s of claim %s is being deleted", spec.VolumeName, key)
			}
			volAlts = pvTopology(pv)
			driver = pvDriver(pv)
		} else {
			// A claim that names no class (nil, not "") gets the default
			// one from the API server; "" turns dynamic provisioning off.
			scName := v.defaultClass
			if spec.StorageClassName != nil {
				scName = *spec.StorageClassName
			}
			if scName == "" {
				return nil, nil, fmt.Errorf("PersistentVolumeClaim %s is not bound and names no StorageClass", key)
			}
			sc := v.classes[scName]
			if sc == nil {
				return nil, nil, fmt.Errorf("StorageClass %s of claim %s does not exist", scName, key)
			}
			if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
				return nil, nil, fmt.Errorf("PersistentVolumeClaim %s uses StorageClass %s with Immediate binding and is not bound yet; use WaitForFirstConsumer", key, scName)
			}
			for _, term := range sc.AllowedTopologies {
				r := Requirements{}
				for _, e := range term.MatchLabelExpressions {
					r.Add(NewRequirement(e.Key, corev1.NodeSelectorOpIn, e.Values...))
				}
				if len(r) > 0 {
					volAlts = append(volAlts, r)
				}
			}
			driver = csiDriver(sc.Provisioner)
		}
		refs = append(refs, volumeRef{id: key, driver: driver})
		if len(volAlts) > 0 {
			alts = mergeAlternatives(alts, volAlts)
		}
	}
	if len(alts) == 1 && alts[0] == nil {
		return nil, refs, nil
	}
	return alts, refs, nil
}

// pvTopology reads a volume's node affinity terms; hostname terms of local
// and hostPath volumes are dropped since a new node cannot have them.
func pvTopology(pv *corev1.PersistentVolume) []Requirements {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []Requirements
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		r := Requirements{}
		for _, e := range term.MatchExpressions {
			if local && e.Key == wellknown.HostnameLabel {
				continue
			}
			r.Add(NewRequirement(e.Key, e.Operator, e.Values...))
		}
		out = append(out, r)
	}
	return out
}

// mergeAlternatives combines two volumes' alternatives pairwise, keeping
// the compatible pairs (all pairs when none is).
func mergeAlternatives(have, add []Requirements) []Requirements {
	var out []Requirements
	for _, h := range have {
		for _, a := range add {
			if h != nil && h.Intersects(a) != nil {
				continue
			}
			m := Requirements{}
			if h != nil {
				m.AddAll(h)
			}
			m.AddAll(a)
			out = append(out, m)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, h := range have {
		for _, a := range add {
			m := Requirements{}
			if h != nil {
				m.AddAll(h)
			}
			m.AddAll(a)
			out = append(out, m)
		}
	}
	return out
}
